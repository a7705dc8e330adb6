#pragma once

// The scheduler's own state, shared by its two halves: scheduler.cpp (when rounds run, and what
// a finished round does) and round_collection.cpp (how a round's readings are started and
// collected). Included by those two files only.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "detector/engine/scheduler.h"
#include "probes/async_probe.h"
#include "probes/event_loop.h"

namespace sbd {

/// One member's probes and whether a call of each is still running.
struct Scheduler::MemberSlot {
  std::unique_ptr<MemberProbe> probe;
  AsyncMemberProbe* async = nullptr;  // `probe`, when it runs on an event loop
  std::atomic<bool> busy{false};
  std::unique_ptr<ManagerProbe> rest;  // members with a manager only
  std::atomic<bool> rest_busy{false};
  /// The manager's last answer was a timeout (loop thread only): a round does not wait for it
  /// again until it answers in time, so a frozen manager (a paused Patroni) costs one round
  /// `probe_timeout`, not every round. Its reading is still taken when it comes in time.
  bool rest_timed_out = false;
};

/// A cluster's probes and state. Only its round (on the loop thread, one at a time) changes
/// `members` and `state.spec` (under Scheduler::mu_), so it may read them without the lock.
struct Scheduler::ClusterRuntime {
  /// Shared with the calls in flight, so that a member dropped by discovery outlives them.
  std::vector<std::shared_ptr<MemberSlot>> members;
  std::unique_ptr<LockStore> lock_store;  // clusters whose record a lock store keeps only
  std::atomic<bool> dcs_busy{false};
  /// Discovered members absent from the DCS's latest answer, and since when.
  std::map<std::string, WallClock::time_point> absent_since;
  ClusterSnapshot state;  // guarded by Scheduler::mu_
  // The loop thread's only (the timers are made there, on the cluster's first round):
  std::unique_ptr<LoopTimer> round_timer;    // the next round
  std::unique_ptr<LoopTimer> collect_timer;  // the deadline of the ProbeRound under way
  SteadyClock::time_point next{};            // the next round's slot (also under mu_)
  bool in_round = false;
  bool again = false;                               // a round was asked for while one was under way
  std::vector<std::function<void()>> waiting_this;  // told when the round under way ends
  std::vector<std::function<void()>> waiting_next;  // told when the next round ends
  // Wake(): the lock store's watch (set and reset under mu_), a round asked for, and the end
  // of the follow-up window (all guarded by Scheduler::mu_).
  std::unique_ptr<LockWatch> watch;
  SteadyClock::time_point follow_up_until{};
  bool again_follow_up = false;  // the round asked for while one was under way is a wake's
};

/// A round under way, carried from one continuation to the next on the loop thread.
struct Scheduler::RoundWork {
  RoundTimes times;
  bool on_timer = false;   // started by the cluster's timer (not asked for)
  bool follow_up = false;  // a wake's or its follow-up: the timed schedule stays as it is
  RoundReadings readings;
  std::string lineage;
  std::vector<size_t> again;  // the confirmation candidates
  int retries = 0;
  Confirmation confirmation;
  bool ended = false;
};

}  // namespace sbd
