// Patroni's REST answers (GET /patroni, GET /cluster) as a member, or anything on its port,
// could send them. Each input goes through both parsers.
#include <cstdint>
#include <string>

#include "probes/json_fields.h"
#include "probes/patroni.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Parsed as StartFetchJson parses every answer: depth first checked, never recursing on it.
  auto json = sbd::ParseUntrustedJson(std::string(reinterpret_cast<const char*>(data), size));
  if (!std::holds_alternative<nlohmann::json>(json)) return 0;
  const nlohmann::json& body = std::get<nlohmann::json>(json);
  auto parsed = sbd::PatroniRestProbe::ParsePatroni(body);
  sbd::PatroniReading reading;
  if (auto* own = std::get_if<sbd::PatroniReading>(&parsed)) reading = *own;
  sbd::PatroniRestProbe::ParseCluster(body, &reading);
  return 0;
}
