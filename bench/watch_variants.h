// Part `page`, issue 13: the detector with and without its lock-store watch, side by side on
// the same frozen-leader trials. Four more detectors watch the bench's Patroni cluster, each
// under its own cluster name: polling only and with the watch, at probe intervals of 1 s and
// 5 s. Each pushes to the bench's Alertmanager (group_wait 1 s) and to a second one with
// group_wait 0 s, each with its own webhook receiver, so one trial gives every row.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/patroni_environment.h"

namespace sbd::bench {

/// The four detectors and the second Alertmanager. Not thread-safe.
class WatchVariants {
 public:
  /// `binary` is the detector; `env` the bench's Patroni environment (outlives this).
  WatchVariants(const std::string& binary, testing::Environment& env);
  /// True when no variant's alert is active in either Alertmanager and every variant says
  /// healthy.
  bool Quiet() const;
  /// One frozen-leader trial's figures for every variant: onset to the detector's confirmed
  /// verdict (the SplitBrain alert's startsAt) and to each webhook's first SplitBrain page.
  /// Waits for the pages (up to `deadline` after the onset).
  nlohmann::json Trial(std::chrono::steady_clock::time_point freeze,
                       std::chrono::steady_clock::time_point onset, double onset_wall,
                       std::chrono::seconds deadline) const;
  /// Warnings and pages of every variant (and the bench's own detector) delivered since
  /// `since`: SplitBrainSuspected or SplitBrain firing, per cluster name.
  nlohmann::json WarningsSince(std::chrono::steady_clock::time_point since) const;
  /// The summary of `trials` (from Trial()): medians and maxima per variant and row.
  static nlohmann::json Summary(const nlohmann::json& trials);
  /// Cluster names, in table order.
  static const std::vector<std::string>& Names();

 private:
  struct Variant {
    std::string name;
    int port = 0;
    std::unique_ptr<testing::DetectorProcess> detector;
  };
  testing::Environment& env_;
  std::unique_ptr<testing::WebhookReceiver> webhook0_;
  std::unique_ptr<testing::AlertmanagerServer> am0_;
  std::vector<Variant> variants_;
};

}  // namespace sbd::bench
