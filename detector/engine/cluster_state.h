#pragma once

// What the engine knows of one cluster, as the scheduler keeps it and hands it out: the read
// model of the output (status, metrics, alerts, the page, the incident log) and what a reload
// carries over (detector/engine/fold.h).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "detector/engine/kind_registry.h"
#include "detector/engine/write_window.h"
#include "detector/remediation/remediator.h"
#include "detector/verdicts/lineage.h"
#include "detector/verdicts/verdict.h"
#include "probes/lock_watch.h"
#include "probes/probe.h"
#include "suppressors/suppressor.h"

namespace sbd {

/// Counters kept per member; monotonic for the life of the scheduler.
struct MemberCounters {
  std::uint64_t probes = 0;
  std::map<std::string, std::uint64_t> failures_by_reason;
  std::map<std::string, std::uint64_t> rest_failures_by_reason;  ///< Patroni REST API
  double last_duration_seconds = 0;
};

/// The timing a cluster runs at, and where each value came from. The validated spec is never
/// rewritten: with no ttl in the config, the lock store's ttl (Patroni's) is the one the page
/// must beat, and it may lower the probe interval; that is said here.
struct Timing {
  Millis ttl{};
  Millis probe_interval{};
  Millis probe_timeout{};
  /// "config"; "default" (no ttl in the config, none read from the lock store yet); or
  /// "lock store".
  const char* ttl_source = "config";
  /// "config", or "ttl/10" (the lock store's ttl is below three configured intervals).
  const char* interval_source = "config";
};

/// The spec's own timing.
Timing TimingOf(const ClusterSpec& spec);
/// The spec's timing under a ttl read from the lock store.
Timing TimingWithStoreTtl(const ClusterSpec& spec, Millis store_ttl);

/// A consistent copy of one cluster's state, taken under the scheduler's lock.
struct ClusterSnapshot {
  ClusterSpec spec;  ///< as validated, but for the members discovery adds and drops
  /// Set once the lock store's ttl decides the timing; nullopt: the spec's own.
  std::optional<Timing> store_timing;
  /// What the cluster runs at now.
  Timing timing() const { return store_timing ? *store_timing : TimingOf(spec); }
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
  /// Rounds in a row that gave the current verdict (1 on the round that changed it).
  std::uint64_t verdict_rounds = 0;
  /// A split-brain incident: opened by a confirmed split brain, closed only by a round that
  /// read every member and found at most one writable. A member that turns unreadable
  /// mid-incident therefore never resolves the page (it was not seen to be over).
  bool split_brain_open = false;
  WallClock::time_point split_brain_opened_at{};
  /// During an incident: the zombies and the lock holder the latest round that saw any named,
  /// and that round's time, so that a page sent after the zombie turned unreadable still says
  /// whom to stop. Cleared when the incident closes.
  std::vector<std::string> split_brain_zombies;
  std::string split_brain_holder;
  WallClock::time_point split_brain_zombies_at{};
  /// During an incident (split brain open, or two writable in the lineage): the fork point,
  /// what each writable member wrote since it, and the double-write window; nullopt outside.
  std::optional<WriteWindow> write_window;

  /// The lock: whether a store keeps its record, and where.
  LockDescription lock;
  // Clusters with a lock store: its answers.
  std::optional<LockRecordResult> last_dcs;  ///< this round's answer
  std::optional<LockRecord> last_good_dcs;   ///< the latest successful one
  WallClock::time_point last_dcs_success{};
  std::uint64_t dcs_failures = 0;
  std::uint64_t dcs_consecutive_failures = 0;

  // Suppressors.
  /// Candidates that failed confirmation because a switchover or failover was under way.
  std::uint64_t transitions = 0;
  std::optional<TransitionEvidence> last_transition;
  WallClock::time_point last_transition_at{};
  /// The last member seen as the only writable one, and its timeline then.
  std::string last_primary;
  std::int64_t last_primary_timeline = 0;
  /// This cluster's lineage writable elsewhere too (another cluster or scope).
  std::vector<LineageFork> forks;
  /// Rounds in a row with an undeclared fork.
  std::uint64_t fork_rounds = 0;

  // Discovery.
  /// Members the DCS registered beyond discovery.max_members: named, never probed.
  std::vector<std::string> discovery_rejected;
  /// Discovered members dropped after being gone from the DCS and unreadable for expire_after.
  std::uint64_t discovered_expired = 0;

  // Lock-store watch (kinds that offer one).
  /// The watch's state; nullopt when the cluster's lock store offers no watch.
  std::optional<LockWatchStatus> watch;
  /// Wake() calls (each a holder change the watch reported), and the rounds run early for them.
  std::uint64_t wakes = 0;
  std::uint64_t follow_up_rounds = 0;

  // Opt-in remediation (detector/remediation/): its actions and why the latest finding got none.
  RemediationView remediation;
};

}  // namespace sbd
