#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "detector/config/config.h"
#include "detector/engine/cluster_state.h"
#include "detector/engine/confirmation.h"
#include "detector/engine/discovery.h"
#include "detector/engine/kind_registry.h"
#include "detector/engine/probe_executor.h"
#include "detector/engine/write_window.h"
#include "detector/verdicts/lineage.h"
#include "detector/verdicts/verdict.h"
#include "probes/probe.h"
#include "suppressors/suppressor.h"

namespace sbd {

class AsyncLockStore;
class Remediator;  // detector/remediation/remediator.h

class LoopGate;   // probes/async_probe.h
class EventLoop;  // probes/event_loop.h

/// Where the scheduler gets the declarations in force; called once per round.
using DeclarationSource = std::function<std::vector<Declaration>(WallClock::time_point)>;

/// How long a lock-store watch's Wake() follows up: long enough for a new holder to promote
/// after taking the lock, bounded so that a holder that never settles costs at most this.
constexpr std::chrono::milliseconds kWatchFollowUp{10000};
/// The interval of the rounds that follow a Wake() until the cluster settles.
constexpr std::chrono::milliseconds kFollowUpInterval{100};

/// Runs one round per cluster every probe interval, all members probed concurrently and
/// each probe bounded by its deadline, confirms candidates with an immediate concurrent
/// re-probe, and keeps each cluster's verdict and evidence. A round is a continuation on the
/// event loop, driven by a timer per cluster: its async member probes run on the loop, its
/// blocking calls on the bounded ProbeExecutor, each answer posted back to the loop; so the
/// threads stay the same whatever the number of clusters. Thread-safe; neither copyable nor
/// movable.
class Scheduler {
 public:
  /// Called after every round with the cluster's fresh snapshot, on the event loop's thread:
  /// it must not block, nor call Stop() or RunOnce().
  using RoundListener = std::function<void(const ClusterSnapshot&)>;

  explicit Scheduler(const ValidatedConfig& config, ProbeFactories factories = ProbeFactories());
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Carries each cluster's state over from a previous scheduler (same cluster name): member
  /// histories and counters of members still configured, discovered members while discovery
  /// stays on, and the open incident, verdict, forks, transitions and last primary. A reload
  /// therefore never resolves a page. Call before Start().
  void Inherit(const std::vector<ClusterSnapshot>& previous);
  void SetRoundListener(RoundListener listener);
  /// Declarations the suppressors consult; none when not set.
  void SetDeclarationSource(DeclarationSource source);
  /// Where the rounds the remediation gate passes are acted on (detector/remediation/), and
  /// whose records each round's snapshot carries; none when not set. Call before Start().
  void SetRemediator(std::shared_ptr<Remediator> remediator);

  /// Starts every cluster's rounds on the event loop (the first ones spread over at most one
  /// interval), and the watch of each lock store that offers one (it calls Wake() with
  /// kWatchFollowUp when the store says the holder changed).
  void Start();
  /// Starts the cluster's round now (or as soon as the running one ends), then runs rounds
  /// every kFollowUpInterval until `follow_up_for` has passed or a round settles (one writable
  /// member, the lock's holder when there is a store, or a confirmed split brain); the timed
  /// rounds keep their slots. A name that is no cluster's is ignored. Thread-safe.
  void Wake(const std::string& cluster_name, std::chrono::milliseconds follow_up_for);
  /// Stops the rounds and waits for those in flight (they end by their deadlines).
  void Stop();
  /// Runs one round (with confirmation) for every cluster, concurrently, and returns when all
  /// have ended; a cluster whose round is under way runs another right after it.
  void RunOnce();

  std::vector<ClusterSnapshot> Snapshot() const;
  /// True once every cluster has finished at least one round.
  bool AllClustersHaveRun() const;
  /// Threads in the probe pool: one per blocking call that can run at once, growing with
  /// discovery up to kMaxProbeThreads.
  size_t probe_threads() const { return executor_->threads(); }

 private:
  struct MemberSlot;
  struct ClusterRuntime;

  using PatroniResult = std::variant<PatroniReading, ProbeFailure>;
  /// When a round started (both clocks) and when its readings were all in.
  struct RoundTimes {
    WallClock::time_point start_wall;
    SteadyClock::time_point start;
    WallClock::time_point end_wall;
  };

  struct Collector;
  struct RoundWork;
  /// Receives a ProbeRound's readings, on the loop thread.
  using ReadingsDone = std::function<void(RoundReadings)>;

  /// Starts `cluster`'s round now (loop thread only): the one place a round begins, whether
  /// its timer fired or someone asked. A round under way gets another right after it.
  /// `done` runs on the loop thread once the round that answers it has ended.
  /// `follow_up`: a wake's round, which leaves the timed schedule as it is.
  void StartRound(ClusterRuntime& cluster, bool on_timer, std::function<void()> done,
                  bool follow_up = false);
  /// A wake's round now (loop thread), or right after the one under way.
  void StartFollowUp(ClusterRuntime& cluster);
  /// Arms the cluster's timer (loop thread): the follow-up at `follow_up` when it comes before
  /// the timed slot, else the timed round.
  void ArmNextRound(ClusterRuntime& cluster, SteadyClock::time_point follow_up);
  /// Asks for `cluster`'s round now, from any thread (posts StartRound to the loop).
  void RequestRound(ClusterRuntime& cluster, std::function<void()> done);
  /// The end of a round (loop thread): tells whoever waited, arms the next round's timer.
  void EndRound(ClusterRuntime& cluster, RoundWork& work);
  /// Starts each lock store's watch, if its kind offers one, wired to Wake().
  void StartWatches();
  /// When the next follow-up round of a woken cluster is due: kFollowUpInterval after `now`
  /// while its window is open and its latest round did not settle, else never (the window is
  /// closed). Requires mu_.
  SteadyClock::time_point NextFollowUp(ClusterRuntime& cluster, SteadyClock::time_point now);
  /// True when a follow-up can stop: one writable member, holding the lock when a store keeps
  /// one, or a split brain confirmed.
  static bool RoundSettled(const ClusterSnapshot& state);
  /// Probes the given members (and, outside confirmation, their REST APIs and the lock
  /// store) concurrently under one deadline, and hands the readings to `then` on the loop
  /// thread once all are in or at the deadline plus a grace. A confirmation re-probe reads
  /// PostgreSQL only, and sends the readings together through a start gate.
  void ProbeRound(ClusterRuntime& cluster, const std::vector<size_t>& member_indexes,
                  bool confirmation, ReadingsDone then);
  /// The round's first readings are in: preview the lineage, confirm a candidate.
  void AfterReadings(ClusterRuntime& cluster, std::shared_ptr<RoundWork> work);
  /// The lineage the cluster's history would give once this round is folded in.
  std::string PreviewLineage(ClusterRuntime& cluster, const RoundReadings& readings,
                             WallClock::time_point at);
  /// Re-probes the round's candidates together; AfterReprobe takes the readings.
  void Reprobe(ClusterRuntime& cluster, std::shared_ptr<RoundWork> work);
  /// A confirmation re-probe is in: re-probe again while every candidate stays writable with
  /// no overlap (a bounded number of times), else fold it into the round.
  void AfterReprobe(ClusterRuntime& cluster, std::shared_ptr<RoundWork> work,
                    RoundReadings reprobe);
  /// Records the round, adopts the members the lock record lists, tells the listener.
  void FinishRound(ClusterRuntime& cluster, std::shared_ptr<RoundWork> work);
  /// The declarations in force at `at`, from the source.
  std::vector<Declaration> ActiveDeclarations(WallClock::time_point at);
  /// Folds the round into the cluster's state under the lock (FoldRound), then the forks across
  /// clusters, remediation and the round's counters. Returns the listener
  /// to call, with `snapshot` copied under the same lock; empty when there is none.
  RoundListener RecordRound(ClusterRuntime& cluster, RoundReadings& readings,
                            Confirmation confirmation, const std::vector<Declaration>& active,
                            const RoundTimes& times, ClusterSnapshot& snapshot);
  /// Starts `slot`'s probe on its event loop unless its previous reading still runs; the
  /// answer goes to `deliver` on the scheduler's loop. False when it could not start.
  bool LaunchOnLoop(std::shared_ptr<MemberSlot> slot, const std::string& name,
                    SteadyClock::time_point deadline, std::shared_ptr<LoopGate> gate,
                    std::function<void(Observation)> deliver);
  /// Starts a lock store's read on its event loop unless its previous read still runs; the
  /// answer goes to `deliver` on the scheduler's loop. False when it could not start.
  /// Starts the cluster's lock-store read: on the event loop for an AsyncLockStore, on the
  /// pool otherwise. False when its previous read is still running.
  bool LaunchStoreRead(ClusterRuntime& cluster, SteadyClock::time_point deadline,
                       std::function<void(LockRecordResult)> deliver);
  bool LaunchStoreOnLoop(AsyncLockStore& store, std::atomic<bool>& busy,
                         SteadyClock::time_point deadline,
                         std::function<void(LockRecordResult)> deliver);
  /// Starts a member's manager reading: on the event loop for an AsyncManagerProbe, on the
  /// pool otherwise. False when its previous reading is still running.
  bool LaunchManager(const std::shared_ptr<MemberSlot>& shared, SteadyClock::time_point deadline,
                     std::function<void(PatroniResult)> deliver);
  /// Posts `start` to `on` unless the previous call guarded by `busy` still runs (then false);
  /// the answer `start` hands on goes to `deliver` on the scheduler's loop. A `start` that
  /// throws answers an internal failure naming `what`.
  template <typename T>
  bool StartOnLoop(EventLoop& on, std::shared_ptr<MemberSlot> keep, std::atomic<bool>& busy,
                   const char* what, std::function<void(std::function<void(T)>)> start,
                   std::function<void(T)> deliver);
  /// Starts one member's reading: on the event loop when its probe runs there (through
  /// `loop_gate` at confirmation), else on the executor (through `gate`). Arrives at the gate
  /// for it when it cannot start (its previous reading still runs). False when not started.
  bool LaunchMember(const std::shared_ptr<MemberSlot>& shared, const std::string& name,
                    SteadyClock::time_point deadline, const ReadingWindow& started,
                    const std::shared_ptr<StartGate>& gate,
                    const std::shared_ptr<LoopGate>& loop_gate,
                    std::function<void(Observation)> deliver);
  /// Runs `call` on the executor unless the previous call guarded by `busy` still runs (then
  /// false), and posts its answer to `deliver` on the loop thread. A call that throws, or
  /// that waited in the queue past `deadline` (every thread busy), answers `failed` instead.
  template <typename T>
  bool Launch(std::shared_ptr<MemberSlot> keep, std::atomic<bool>& busy,
              SteadyClock::time_point deadline, std::function<T()> call,
              std::function<T(ProbeFailure)> failed, std::function<void(T)> deliver);
  /// Gives configured members their registered REST URL and adds discovered members, up to
  /// discovery.max_members; drops those gone from the DCS and unreadable for expire_after.
  void AdoptDcsMembers(ClusterRuntime& cluster, const LockRecord& view);
  /// Adds a slot for `member` (probes and counters); the loop thread or before Start().
  void AddMemberSlot(ClusterRuntime& cluster, MemberSpec member);
  /// Threads enough for every concurrent call of every member, up to kMaxProbeThreads.
  void SizeExecutor();
  /// Recomputes every cluster's lineage forks from their latest rounds. Requires mu_.
  // The remediation gate on the round just recorded (under mu_), and the remediation's view.
  void Remediate(ClusterSnapshot& state, bool undeclared_fork);
  void UpdateForks(const std::vector<Declaration>& active, WallClock::time_point now);

  ProbeFactories factories_;

  std::vector<std::unique_ptr<ClusterRuntime>> clusters_;
  mutable std::mutex mu_;              // guards every ClusterRuntime::state
  std::condition_variable rounds_cv_;  // a round ended (rounds_in_flight_ went down)
  size_t rounds_in_flight_ = 0;        // guarded by mu_
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  RoundListener listener_;
  DeclarationSource declarations_;
  std::shared_ptr<Remediator> remediator_;
  SteadyClock::time_point forks_updated_{};  // guarded by mu_
  /// Where rounds run: the process's event loop (never destroyed, so late answers can post).
  EventLoop& loop_;
  std::unique_ptr<ProbeExecutor> executor_;  // last member: destroyed first, joins workers
};

}  // namespace sbd
