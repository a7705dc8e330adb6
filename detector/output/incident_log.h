#pragma once

#include <prometheus/collectable.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "detector/engine/cluster_state.h"
#include "detector/output/incident_file.h"

namespace sbd {

/// What GET /api/v1/incidents asks for.
struct IncidentQuery {
  std::string cluster;  ///< "" for every cluster
  std::optional<WallClock::time_point> since;
  size_t limit = 100;
};

/// Validates the query string (cluster, since as RFC 3339, limit from 1 to 1000; nothing else,
/// each at most once); the reason when it is invalid. Pure.
std::variant<IncidentQuery, std::string> ParseIncidentQuery(
    const std::multimap<std::string, std::string>& params);

/// Every verdict change and member state change per cluster, built by diffing the scheduler's
/// snapshots round by round, kept for `retention` and at most `max_events` (the oldest dropped
/// first and counted), and, with a file, appended to it as JSON lines and read back at start.
/// The file is rewritten (temp file and rename) once dropped events make up half of it.
/// Thread-safe: one mutex guards the events and the per-cluster memory, and is never held
/// during disk I/O: appends and rewrites go, in order, through a bounded queue to one writer
/// thread, so that a slow or hung disk never holds the round that records an event. When the
/// queue is full, what waits in it is replaced by one rewrite of every kept event (the file
/// loses nothing held in memory), and the appends so replaced are counted.
class IncidentLog {
 public:
  using WriteHook = IncidentFileWriter::WriteHook;
  /// Appends and rewrites waiting for the writer at most; beyond, they become one rewrite.
  static constexpr size_t kMaxQueuedWrites = 256;

  /// Reads `spec.file` when set; an unreadable file is logged and the log starts empty.
  explicit IncidentLog(IncidentLogSpec spec, WallClock::time_point now = WallClock::now(),
                       std::uintmax_t max_file_bytes = kMaxIncidentFileBytes,
                       WriteHook before_write = nullptr);
  /// Waits up to 5 s for the queued writes to land, then leaves the writer to finish alone.
  ~IncidentLog();
  IncidentLog(const IncidentLog&) = delete;
  IncidentLog& operator=(const IncidentLog&) = delete;

  /// Waits until every write queued so far has landed (or failed); false after `timeout`.
  bool Flush(Millis timeout) const;
  /// Appends replaced by a rewrite because the writer's queue was full, since start.
  std::uint64_t writes_replaced() const;

  /// Folds one cluster's fresh round in (the scheduler's round listener): records what changed
  /// since its previous round, or cluster_added for a cluster not seen before.
  void ObserveRound(const ClusterSnapshot& cluster, WallClock::time_point now = WallClock::now());
  /// Records cluster_removed for every cluster seen before and absent from `clusters` (at
  /// start, for clusters only the file knew, and at every reload).
  void SetClusters(const std::vector<ClusterSpec>& clusters,
                   WallClock::time_point now = WallClock::now());
  /// Every event kept, oldest first.
  std::vector<IncidentEvent> Events() const;
  /// The events kept of the named clusters only, oldest first (the status page's charts).
  std::vector<IncidentEvent> EventsOf(const std::set<std::string>& clusters) const;
  /// The answer to GET /api/v1/incidents: newest first, at most `limit`, with the log's bounds.
  nlohmann::json Query(const IncidentQuery& query) const;
  /// GET /api/v1/incidents from its query parameters: 200 with Query(), or 400 with a reason.
  std::pair<int, std::string> HttpGet(const std::multimap<std::string, std::string>& params) const;

  std::uint64_t dropped() const;        ///< events dropped for the cap, since start
  std::uint64_t skipped_lines() const;  ///< file lines skipped at start
  size_t size() const;

 private:
  struct ClusterMemory {
    std::string verdict;
    bool split_brain_open = false;
    std::map<std::string, std::string> members;  ///< member name -> state
    /// The remediation records already logged (member, time asked, result), of those kept.
    std::set<std::string> remediations;
  };

  void Restore(const IncidentEvent& event);
  void Append(std::vector<IncidentEvent> events, WallClock::time_point now);
  void Prune(WallClock::time_point now);
  void AppendToFile(const std::vector<IncidentEvent>& events);
  void CompactFile();

  const IncidentLogSpec spec_;
  std::shared_ptr<IncidentFileWriter> writer_;  ///< null without a file; shared with its thread
  mutable std::mutex mu_;
  std::deque<IncidentEvent> events_;
  std::map<std::string, ClusterMemory> clusters_;
  std::uint64_t dropped_ = 0;
  std::uint64_t skipped_lines_ = 0;
  std::uint64_t file_lines_ = 0;  ///< lines in the file once the queue is written
  std::uint64_t writes_replaced_ = 0;
};

/// `inner`'s metric families plus splitbrain_incident_log_events,
/// splitbrain_incident_log_dropped_total and splitbrain_incident_log_skipped_lines_total.
std::shared_ptr<prometheus::Collectable> WithIncidentLogMetrics(
    std::shared_ptr<prometheus::Collectable> inner, std::shared_ptr<const IncidentLog> log);

/// For `check` (one probe, no live history): the last `per_cluster` events of each cluster
/// that is not healthy, read from the configured file; "none recorded" when there are none or
/// no file is configured. "" when every cluster is healthy.
std::string IncidentSummaryText(const std::vector<ClusterSnapshot>& clusters,
                                const IncidentLogSpec& spec, size_t per_cluster = 5,
                                WallClock::time_point now = WallClock::now());

}  // namespace sbd
