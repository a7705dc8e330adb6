#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "probes/async_probe.h"
#include "probes/probe.h"

namespace sbd {

/// Reads a Patroni member's REST API: GET /patroni (its own claim) then GET /cluster (its
/// view of the cluster), both inside one deadline, with a cap on the answer size. Every
/// request runs on the event loop (LoopHttpClient), bounded as a whole: a hung or trickling
/// API is a timeout failure here, holds no thread, and never delays the member's PostgreSQL
/// probe, which the scheduler runs beside it. The object may be destroyed on any thread;
/// Start() on the loop thread only, one at a time.
class PatroniRestProbe : public AsyncManagerProbe {
 public:
  explicit PatroniRestProbe(std::string base_url, EventLoop& loop = EventLoop::Shared());
  ~PatroniRestProbe() override;
  PatroniRestProbe(const PatroniRestProbe&) = delete;
  PatroniRestProbe& operator=(const PatroniRestProbe&) = delete;

  void Start(SteadyClock::time_point deadline, Done done) override;
  EventLoop& loop() override { return loop_; }

  /// Parses GET /patroni's JSON; a failure names what is missing or malformed.
  static std::variant<PatroniReading, ProbeFailure> ParsePatroni(const nlohmann::json& body);
  /// Adds GET /cluster's JSON to a reading.
  static std::optional<ProbeFailure> ParseCluster(const nlohmann::json& body,
                                                  PatroniReading* reading);

 private:
  struct Session;
  EventLoop& loop_;
  std::shared_ptr<Session> session_;
};

}  // namespace sbd
