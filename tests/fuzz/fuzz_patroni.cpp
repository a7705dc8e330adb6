// Patroni's REST answers (GET /patroni, GET /cluster) as a member, or anything on its port,
// could send them. Each input goes through both parsers.
#include <cstdint>
#include <string>

#include "probes/patroni.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto body =
      nlohmann::json::parse(std::string(reinterpret_cast<const char*>(data), size), nullptr, false);
  if (body.is_discarded()) return 0;
  auto parsed = sbd::PatroniRestProbe::ParsePatroni(body);
  sbd::PatroniReading reading;
  if (auto* own = std::get_if<sbd::PatroniReading>(&parsed)) reading = *own;
  sbd::PatroniRestProbe::ParseCluster(body, &reading);
  return 0;
}
