#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "detector/config.h"
#include "detector/verdict.h"
#include "probes/probe.h"

namespace sbd {

/// Builds the probe for one member of a cluster; the scheduler owns what it returns.
using ProbeFactory =
    std::function<std::unique_ptr<MemberProbe>(const ClusterSpec&, const MemberSpec&)>;

/// The default factory: a PostgresProbe with the cluster's probe timeout.
ProbeFactory PostgresProbeFactory();

/// Counters kept per member; monotonic for the life of the scheduler.
struct MemberCounters {
  std::uint64_t probes = 0;
  std::map<std::string, std::uint64_t> failures_by_reason;
  double last_duration_seconds = 0;
};

/// A consistent copy of one cluster's state, taken under the scheduler's lock.
struct ClusterSnapshot {
  ClusterSpec spec;
  bool has_round = false;
  Assessment assessment;
  ClusterHistory history;
  std::vector<Observation> last_round;  ///< after confirmation, in member order
  std::map<std::string, MemberCounters> counters;
  std::uint64_t rounds = 0;
  std::uint64_t confirmations_accepted = 0;
  std::uint64_t confirmations_rejected = 0;
  std::uint64_t overruns = 0;  ///< rounds that started late because the previous one ran long
  WallClock::time_point last_round_start{};
  WallClock::time_point last_round_end{};
  double last_round_seconds = 0;
  /// When the current verdict started (wall clock of the round that first gave it).
  WallClock::time_point verdict_since{};
};

/// A fixed pool of threads that run probes. Sized so that members blocked until their
/// deadlines cannot starve the others. Thread-safe.
class ProbeExecutor {
 public:
  explicit ProbeExecutor(size_t threads);
  ~ProbeExecutor();
  ProbeExecutor(const ProbeExecutor&) = delete;
  ProbeExecutor& operator=(const ProbeExecutor&) = delete;
  void Submit(std::function<void()> task);

 private:
  void Work();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

/// Runs one round per cluster every probe interval, all members probed concurrently and
/// each probe bounded by its deadline, confirms candidates with an immediate concurrent
/// re-probe, and keeps each cluster's verdict and evidence. Thread-safe; owns threads, so
/// neither copyable nor movable.
class Scheduler {
 public:
  /// Called after every round with the cluster's fresh snapshot, on the cluster's thread.
  using RoundListener = std::function<void(const ClusterSnapshot&)>;

  explicit Scheduler(const ValidatedConfig& config, ProbeFactory factory = PostgresProbeFactory());
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Carries member histories over from a previous scheduler (same cluster and member
  /// names), so a config reload does not forget who was last seen writable.
  void Inherit(const std::vector<ClusterSnapshot>& previous);
  void SetRoundListener(RoundListener listener);

  /// Starts one thread per cluster.
  void Start();
  /// Stops and joins the cluster threads; in-flight probes end by their deadlines.
  void Stop();
  /// Runs exactly one round (with confirmation) for every cluster, concurrently, and returns.
  void RunOnce();

  std::vector<ClusterSnapshot> Snapshot() const;
  /// True once every cluster has finished at least one round.
  bool AllClustersHaveRun() const;

 private:
  struct MemberSlot;
  struct ClusterRuntime;

  void ClusterLoop(ClusterRuntime& cluster);
  void RunRound(ClusterRuntime& cluster);
  /// Probes the given members concurrently; with `gated`, their readings are sent together.
  std::vector<Observation> ProbeMembers(ClusterRuntime& cluster,
                                        const std::vector<size_t>& member_indexes, bool gated);

  std::vector<std::unique_ptr<ClusterRuntime>> clusters_;
  mutable std::mutex mu_;  // guards every ClusterRuntime::state
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  RoundListener listener_;
  std::vector<std::thread> threads_;
  std::unique_ptr<ProbeExecutor> executor_;  // last member: destroyed first, joins workers
};

}  // namespace sbd
