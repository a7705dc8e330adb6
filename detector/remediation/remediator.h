#pragma once

// The opt-in remediation's actions (docs/remediation.md): what the gate allowed, bounded by one
// action per member per incident and a fleet-wide cap, done off the event loop and recorded.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "detector/config/config.h"
#include "detector/remediation/hook_fence.h"
#include "detector/remediation/pg_fence.h"
#include "detector/remediation/redis_fence.h"
#include "probes/probe.h"

namespace sbd {

/// One action, as recorded. Plain value type.
struct RemediationRecord {
  std::string member;
  std::string holder;  ///< the lock store's holder when it was decided
  /// "postgres_read_only", "redis_write_guard", "hook", or "none" for a kind with no action.
  std::string action;
  std::string mode;  ///< "dry_run" or "fence"
  /// "running" until done; then fenced | failed | not_primary | dry_run | capped.
  std::string result;
  std::string detail;  ///< one line for humans: what was done or would be, or what failed
  WallClock::time_point requested{};
  WallClock::time_point finished{};  ///< epoch while running
  int sessions_ended = 0;
  bool verified = false;  ///< a write from a new connection was refused
  std::string undo;       ///< what undoes the action (empty when nothing was changed)
};

/// What the output shows of one cluster's remediation. Plain value type.
struct RemediationView {
  RemediationMode mode = RemediationMode::kOff;
  std::string action;                      ///< what a fence of this kind does
  std::vector<RemediationRecord> records;  ///< oldest first, the latest kKeptRemediations
  /// Actions by (action, result), monotonic; every result at 0 once the mode is on.
  std::map<std::pair<std::string, std::string>, std::uint64_t> counts;
  std::string hold;  ///< why the latest round with a finding got no action; empty otherwise
};

/// The records kept per cluster.
constexpr size_t kKeptRemediations = 20;
/// Every result an action can have, for the counters' zeros.
const std::vector<std::string>& RemediationResults();
/// The action a fence of `kind` takes: "postgres_read_only", "redis_write_guard", "hook" (the
/// operator's hook is asked to stop the process), or "none".
std::string RemediationAction(const std::string& kind);

/// What the scheduler asks for after a round the gate passed. Plain value type.
struct RemediationRequest {
  std::string cluster;
  std::string kind;
  /// When the split-brain incident opened: one action per member per incident.
  WallClock::time_point incident{};
  RemediationSpec spec;
  std::string holder;
  std::vector<MemberSpec> targets;
  std::optional<RedisTlsSpec> redis_tls;  ///< Redis: as the cluster's members are reached
  /// The tokens the round read, by member (the holder's and the targets'), for the hook.
  std::map<std::string, std::string> tokens;
};

/// Does what the gate allowed: a dry run is recorded at once; a fence is queued to one worker
/// thread (the fence is blocking libpq, bounded by the spec's timeout per step) unless the fleet
/// cap holds, then recorded when done. Outlives reloads (the cap and the per-incident memory
/// with it). Thread-safe; neither copyable nor movable.
class Remediator {
 public:
  using FenceFn = std::function<FenceOutcome(const FenceTarget&)>;
  using RedisFenceFn = std::function<FenceOutcome(const RedisFenceTarget&)>;
  using HookFenceFn = std::function<FenceOutcome(const HookFenceTarget&)>;

  /// The fences are FencePostgres, FenceRedis and FenceByHook unless tests give others.
  explicit Remediator(RemediationLimits limits, FenceFn fence = FencePostgres,
                      RedisFenceFn redis_fence = FenceRedis, HookFenceFn hook_fence = FenceByHook);
  ~Remediator();  ///< finishes the action under way, drops the queued ones (recorded failed)
  Remediator(const Remediator&) = delete;
  Remediator& operator=(const Remediator&) = delete;

  /// A reload's new cap; the actions already counted stay counted.
  void SetLimits(RemediationLimits limits);
  /// Never blocks (called on the event loop). Members already acted on in this incident are
  /// skipped (a dry run is said once per member and incident, and does not keep a later
  /// `mode: fence` from acting in the same incident).
  void Request(const RemediationRequest& request, WallClock::time_point now);
  /// The gate's latest hold for the cluster, and its mode (for the zeros of its counters).
  void Note(const std::string& cluster, const std::string& kind, RemediationMode mode,
            const std::string& hold);
  RemediationView View(const std::string& cluster) const;
  /// True once nothing is queued or running (tests and shutdown).
  bool Idle() const;

 private:
  struct Job {
    std::string cluster;
    std::string action;
    RemediationSpec spec;
    MemberSpec member;
    std::optional<RedisTlsSpec> redis_tls;
    std::uint64_t sequence;
    HookEvidence evidence;  ///< what a hook is told
  };
  struct ClusterRemediation {
    RemediationView view;
    WallClock::time_point incident{};
    std::set<std::string> acted;     ///< members fenced (or capped) in `incident`
    std::set<std::string> dry_runs;  ///< members a dry run named in `incident`
    std::map<std::uint64_t, RemediationRecord> running;  ///< by job sequence, queued or under way
  };

  static void Keep(ClusterRemediation& c, RemediationRecord record);
  bool CapHolds(WallClock::time_point now);
  void Run();
  FenceOutcome Act(const Job& job);
  void Finish(const Job& job, const FenceOutcome& outcome);

  FenceFn fence_;
  RedisFenceFn redis_fence_;
  HookFenceFn hook_fence_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  RemediationLimits limits_;
  std::deque<WallClock::time_point> fences_;  ///< when each fence of the window was asked for
  std::map<std::string, ClusterRemediation> clusters_;
  std::deque<Job> queue_;
  std::uint64_t next_sequence_ = 1;
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace sbd
