#pragma once

// How a finished round folds into a cluster's state (cluster_state.h), and what a reload
// carries over. Pure functions of the state and the round: no threads, no sockets (logging
// aside), so each can be unit-tested on its own.

#include <string>
#include <vector>

#include "detector/engine/cluster_state.h"
#include "detector/engine/confirmation.h"

namespace sbd {

/// The holder the lock store named this round; empty when unknown.
std::string HolderOf(const LockRecordResult* dcs);

/// Folds the round into the member histories and counters.
void RecordObservations(ClusterSnapshot& state, const std::vector<Observation>& round,
                        WallClock::time_point at, const std::string& holder);

/// Keeps the lock store's answer: the latest successful record and when, the failures in a row
/// (logged on the first and when readable again), and, with no ttl configured, the store's own
/// ttl as `store_timing`, with probe_interval at ttl/10 when the ttl is below three configured
/// intervals (said in the log when that changes). `state.spec` is not changed.
void RecordLockStore(ClusterSnapshot& state, const LockRecordResult& dcs, WallClock::time_point at);

/// Folds one round, its readings after confirmation, into the cluster's state at `at`: the
/// member histories and counters, the lock store's answer, fencing, the lineage, the verdict
/// with its suppressions (`active` declarations) and the transition that explains a candidate,
/// the incident, the write window, and the round's readings. What needs every cluster (lineage
/// forks) or acts (remediation), and the round's own counters, are the scheduler's.
void FoldRound(ClusterSnapshot& state, RoundReadings& readings, Confirmation confirmation,
               const std::vector<Declaration>& active, WallClock::time_point at);

/// Counts a switchover or failover that explained a candidate away, and logs it.
void RecordTransition(ClusterSnapshot& state, const TransitionEvidence& transition,
                      WallClock::time_point at);

/// Logs a provisioning suppression the first round it appears (the others are routine).
void LogNewSuppressions(const ClusterSpec& spec, const Assessment& previous,
                        const Assessment& assessment);

/// Keeps the round's verdict: how long it has held, and the split-brain incident, opened by a
/// confirmed split brain and closed only by a round that read every member and found at most
/// one writable.
/// `fenced_zombie_stands`: a member the detector fenced in the open incident is still a primary
/// (read-only, or behind its write guard): the data diverged and a person must act, so the
/// incident (and the page) stays open until it is a replica again.
void RecordVerdict(ClusterSnapshot& state, Assessment assessment, WallClock::time_point at,
                   bool fenced_zombie_stands = false);

/// What a reload keeps of a cluster (see Scheduler::Inherit): everything its rounds wrote, so
/// that a field added to ClusterSnapshot carries over without being listed here, except what
/// the new config decides (`now`'s spec, lock and watch) and what the next round rewrites.
/// Histories, counters and readings follow the new spec's members, which were already chosen.
void InheritState(const ClusterSnapshot& old, ClusterSnapshot& now);

}  // namespace sbd
