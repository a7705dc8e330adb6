#pragma once

#include <prometheus/collectable.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

#include "detector/alerting/alert_pusher.h"
#include "detector/engine/cluster_state.h"
#include "suppressors/declaration_store.h"

namespace sbd {

/// Whether the last config (re)load worked; written by main, read at scrape. Thread-safe.
struct ConfigReloadStatus {
  std::atomic<bool> last_successful{true};
  std::atomic<double> last_success_timestamp{0};
  std::atomic<double> last_attempt_timestamp{0};
};

/// Builds every splitbrain_ metric family afresh at each scrape from the scheduler's
/// snapshot, so series of clusters and members that left the config disappear.
/// Thread-safe.
class DetectorCollector : public prometheus::Collectable {
 public:
  using SnapshotSource = std::function<std::vector<ClusterSnapshot>()>;
  using PushStatsSource = std::function<std::vector<AlertmanagerStats>()>;
  using DeclarationsSource = std::function<DeclarationsView()>;
  /// `push_stats` may be empty when no Alertmanager is configured, `declarations` when none
  /// can be made.
  DetectorCollector(SnapshotSource source, const ConfigReloadStatus* reload_status,
                    PushStatsSource push_stats = {}, DeclarationsSource declarations = {});
  /// Every splitbrain_ family, always in the same order and each present even without
  /// series, so that the /metrics page keeps its layout from scrape to scrape.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  SnapshotSource source_;
  const ConfigReloadStatus* reload_status_;
  PushStatsSource push_stats_;
  DeclarationsSource declarations_;
};

/// The whole /metrics body in the Prometheus text format.
std::string RenderMetrics(const prometheus::Collectable& collectable);

}  // namespace sbd
