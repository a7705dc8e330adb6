// etcd's /v3/kv/range answer for a Patroni scope or an election's prefix, as the gateway (or
// anything on its port, or anyone who can write keys under the prefix) could make it.
#include <cstdint>
#include <string>

#include "probes/etcd.h"
#include "probes/etcd_election.h"
#include "probes/json_fields.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Parsed as StartFetchJson parses every answer: depth first checked, never recursing on it.
  auto parsed = sbd::ParseUntrustedJson(std::string(reinterpret_cast<const char*>(data), size));
  if (!std::holds_alternative<nlohmann::json>(parsed)) return 0;
  const nlohmann::json& body = std::get<nlohmann::json>(parsed);
  // The recorded ranges in tests/testdata/patroni (the seeds) are for this scope.
  sbd::EtcdScopeProbe::ParseRange(body, "/service/sbd-selftest/");
  // The same keys as an election's candidates (etcd_election), with a member to name.
  sbd::MemberSpec member;
  member.name = "a";
  member.lease_identity = "node1";
  sbd::ParseElectionRange(body, "/service/sbd-selftest/", {member});
  return 0;
}
