#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "probes/probe.h"

namespace sbd {

/// Reads a Patroni member's REST API: GET /patroni (its own claim) then GET /cluster (its
/// view of the cluster), both inside one deadline, with a cap on the answer size. A hung
/// API is a timeout failure here and never delays the member's PostgreSQL probe, which the
/// scheduler runs beside it. Stateless between calls; not thread-safe per instance.
class PatroniRestProbe {
 public:
  explicit PatroniRestProbe(std::string base_url) : base_url_(std::move(base_url)) {}
  std::variant<PatroniReading, ProbeFailure> Read(SteadyClock::time_point deadline) const;

  /// Parses GET /patroni's JSON; a failure names what is missing or malformed.
  static std::variant<PatroniReading, ProbeFailure> ParsePatroni(const nlohmann::json& body);
  /// Adds GET /cluster's JSON to a reading.
  static std::optional<ProbeFailure> ParseCluster(const nlohmann::json& body,
                                                  PatroniReading* reading);

 private:
  std::string base_url_;
};

}  // namespace sbd
