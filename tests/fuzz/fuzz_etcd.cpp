// etcd's /v3/kv/range answer for a Patroni scope, as the gateway (or anything on its port, or
// anyone who can write keys under the scope) could make it.
#include <cstdint>
#include <string>

#include "probes/etcd.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto body =
      nlohmann::json::parse(std::string(reinterpret_cast<const char*>(data), size), nullptr, false);
  if (body.is_discarded()) return 0;
  // The recorded ranges in tests/testdata/patroni (the seeds) are for this scope.
  sbd::EtcdScopeProbe::ParseRange(body, "/service/sbd-selftest/");
  return 0;
}
