// How a round's readings are started and collected: every member's probe (on the event loop,
// or the bounded executor for a blocking one), its manager and the lock store, each bounded by
// the round's deadline, and handed on together once all are in or the deadline (plus a grace)
// has passed. A reading that is missing says why.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "detector/common/internal_errors.h"
#include "detector/engine/scheduler_state.h"

namespace sbd {
namespace {

// How long past its deadline the scheduler waits for a probe thread to hand back its result.
constexpr auto kCollectGrace = std::chrono::milliseconds(50);

Observation TimedOut(const std::string& member, const ReadingWindow& window,
                     const std::string& why) {
  Observation obs;
  obs.member = member;
  obs.window = window;
  obs.window.received = SteadyClock::now();
  obs.result = ProbeFailure{ProbeFailureReason::kTimeout, why};
  return obs;
}

// Why a reading is missing when its round collects.
constexpr const char* kNoAnswer = "no answer before the deadline";
constexpr const char* kStillRunning = "previous probe still running";
// What a call answers when it waited in the executor's queue until its deadline.
constexpr const char* kNotStarted = "not started before the deadline: every probe thread was busy";
// A manager reading the round did not wait for: the previous one timed out.
constexpr const char* kNotAwaited =
    "no answer when the round ended (not awaited: timed out before)";

}  // namespace

/// One ProbeRound in flight: what has answered so far, and whom to hand the readings to once
/// all are in or the deadline (plus the grace) has passed. Shared with the calls in flight,
/// which may answer after the round moved on (then they are dropped); touches nothing but
/// itself until it hands over. Loop thread only.
struct Scheduler::Collector {
  std::vector<std::string> names;
  ReadingWindow started;
  std::vector<std::optional<Observation>> members;
  std::vector<const char*> members_missing;  // why, when a member has no answer
  std::vector<bool> want_claims;
  std::vector<std::optional<PatroniResult>> claims;
  std::vector<const char*> claims_missing;
  bool want_dcs = false;
  std::optional<LockRecordResult> dcs;
  const char* dcs_missing = kNoAnswer;
  int waiting = 1;  // the calls in flight, plus the launch itself until everything started
  bool done = false;
  ReadingsDone then;

  void Answered() {
    if (--waiting == 0) Finish();
  }

  // Hands over what is in; a reading still missing is a timeout with its reason.
  void Finish() {
    if (done) return;
    done = true;
    RoundReadings out;
    for (size_t i = 0; i < names.size(); ++i) {
      Observation obs =
          members[i] ? std::move(*members[i]) : TimedOut(names[i], started, members_missing[i]);
      if (want_claims[i]) {
        obs.patroni =
            claims[i]
                ? std::move(*claims[i])
                : PatroniResult(ProbeFailure{ProbeFailureReason::kTimeout, claims_missing[i]});
      }
      out.members.push_back(std::move(obs));
    }
    if (want_dcs) {
      out.dcs = dcs ? std::move(*dcs)
                    : LockRecordResult(ProbeFailure{ProbeFailureReason::kTimeout, dcs_missing});
    }
    ReadingsDone next = std::move(then);
    then = nullptr;
    next(std::move(out));
  }
};

template <typename T>
bool Scheduler::Launch(std::shared_ptr<MemberSlot> keep, std::atomic<bool>& busy,
                       SteadyClock::time_point deadline, std::function<T()> call,
                       std::function<T(ProbeFailure)> failed, std::function<void(T)> deliver) {
  if (busy.exchange(true)) return false;
  EventLoop* loop = &loop_;
  executor_->Submit([keep = std::move(keep), &busy, deadline, loop, call = std::move(call),
                     failed = std::move(failed), deliver = std::move(deliver)] {
    std::optional<T> value;
    if (SteadyClock::now() >= deadline) {
      // Saturated: it waited in the queue until its deadline, and answers as a timeout.
      value.emplace(failed(ProbeFailure{ProbeFailureReason::kTimeout, kNotStarted}));
    } else {
      // A probe that throws (it must not) still answers, and its member is probed again.
      Guarded("probe", [&] { value.emplace(call()); });
    }
    if (!value) {
      value.emplace(failed(ProbeFailure{ProbeFailureReason::kInternal,
                                        "the probe failed unexpectedly (internal error)"}));
    }
    busy.store(false);
    loop->Post([deliver, answer = std::move(*value)]() mutable { deliver(std::move(answer)); });
  });
  return true;
}

bool Scheduler::LaunchOnLoop(std::shared_ptr<MemberSlot> slot, const std::string& name,
                             SteadyClock::time_point deadline, std::shared_ptr<LoopGate> gate,
                             std::function<void(Observation)> deliver) {
  if (slot->busy.exchange(true)) return false;
  EventLoop* loop = &loop_;
  AsyncMemberProbe& probe = *slot->async;
  probe.loop().Post([slot, name, deadline, gate, loop, deliver = std::move(deliver)]() mutable {
    MemberSlot* member = slot.get();
    auto answered = std::make_shared<bool>(false);  // the probe loop thread's only
    // `slot` rides in the callback, so that a member dropped by discovery outlives its call.
    auto answer = [slot, loop, answered, deliver](Observation obs) {
      *answered = true;
      slot->busy.store(false);
      loop->Post([deliver, obs = std::move(obs)]() mutable { deliver(std::move(obs)); });
    };
    const bool started =
        Guarded("probe", [&] { member->async->Start(deadline, std::move(gate), answer); });
    if (!started && !*answered) {
      // A probe that throws (it must not) still answers, and its member is probed again.
      Observation obs = TimedOut(name, ReadingWindow{WallClock::now(), SteadyClock::now(), {}}, "");
      obs.result = ProbeFailure{ProbeFailureReason::kInternal,
                                "the probe failed unexpectedly (internal error)"};
      answer(std::move(obs));
    }
  });
  return true;
}

template <typename T>
bool Scheduler::StartOnLoop(EventLoop& on, std::shared_ptr<MemberSlot> keep,
                            std::atomic<bool>& busy, const char* what,
                            std::function<void(std::function<void(T)>)> start,
                            std::function<void(T)> deliver) {
  if (busy.exchange(true)) return false;
  EventLoop* loop = &loop_;
  // `keep` rides in the callback, so that a member dropped by discovery outlives its call; a
  // store and its busy flag live as long as the cluster, as with Launch<T>.
  on.Post([keep, &busy, what, loop, start = std::move(start), deliver = std::move(deliver)] {
    auto answered = std::make_shared<bool>(false);
    auto answer = [keep, &busy, loop, deliver, answered](T read) {
      *answered = true;
      busy.store(false);
      loop->Post([deliver, read = std::move(read)]() mutable { deliver(std::move(read)); });
    };
    const bool started = Guarded(what, [&] { start(answer); });
    if (!started && !*answered) {
      answer(T(ProbeFailure{ProbeFailureReason::kInternal,
                            std::string("the ") + what + " failed unexpectedly (internal error)"}));
    }
  });
  return true;
}

bool Scheduler::LaunchStoreOnLoop(AsyncLockStore& store, std::atomic<bool>& busy,
                                  SteadyClock::time_point deadline,
                                  std::function<void(LockRecordResult)> deliver) {
  return StartOnLoop<LockRecordResult>(
      store.loop(), nullptr, busy, "lock store",
      [&store, deadline](std::function<void(LockRecordResult)> done) {
        store.Start(deadline, done);
      },
      std::move(deliver));
}

bool Scheduler::LaunchManager(const std::shared_ptr<MemberSlot>& shared,
                              SteadyClock::time_point deadline,
                              std::function<void(PatroniResult)> deliver) {
  MemberSlot& slot = *shared;
  // A manager that reads on the event loop holds no pool thread; the others read on the pool.
  if (auto* async = dynamic_cast<AsyncManagerProbe*>(slot.rest.get())) {
    return StartOnLoop<PatroniResult>(
        async->loop(), shared, slot.rest_busy, "manager probe",
        [async, deadline](std::function<void(PatroniResult)> done) {
          async->Start(deadline, done);
        },
        std::move(deliver));
  }
  return Launch<PatroniResult>(
      shared, slot.rest_busy, deadline, [&slot, deadline] { return slot.rest->Read(deadline); },
      [](ProbeFailure f) { return PatroniResult(std::move(f)); }, std::move(deliver));
}

bool Scheduler::LaunchMember(const std::shared_ptr<MemberSlot>& shared, const std::string& name,
                             SteadyClock::time_point deadline, const ReadingWindow& started,
                             const std::shared_ptr<StartGate>& gate,
                             const std::shared_ptr<LoopGate>& loop_gate,
                             std::function<void(Observation)> deliver) {
  MemberSlot& slot = *shared;
  if (slot.async) {
    const bool launched = LaunchOnLoop(shared, name, deadline, loop_gate, std::move(deliver));
    // Not started: the loop gate must not wait for it (posted: the gate lives on the loop).
    if (!launched && loop_gate) slot.async->loop().Post([loop_gate] { loop_gate->Leave(); });
    return launched;
  }
  const bool launched = Launch<Observation>(
      shared, slot.busy, deadline,
      [&slot, deadline, gate] { return slot.probe->Probe(deadline, gate.get()); },
      [name, started, gate](ProbeFailure f) {
        // A probe that threw, or never ran, may not have arrived at the gate.
        if (gate) gate->Arrive();
        Observation obs = TimedOut(name, started, "");
        obs.result = std::move(f);
        return obs;
      },
      std::move(deliver));
  if (!launched && gate) gate->Arrive();
  return launched;
}

bool Scheduler::LaunchStoreRead(ClusterRuntime& cluster, SteadyClock::time_point deadline,
                                std::function<void(LockRecordResult)> deliver) {
  // A store that reads on the event loop holds no pool thread; the others read on the pool.
  if (auto* async = dynamic_cast<AsyncLockStore*>(cluster.lock_store.get())) {
    return LaunchStoreOnLoop(*async, cluster.dcs_busy, deadline, std::move(deliver));
  }
  return Launch<LockRecordResult>(
      nullptr, cluster.dcs_busy, deadline,
      [&cluster, deadline] { return cluster.lock_store->Read(deadline); },
      [](ProbeFailure f) { return LockRecordResult(std::move(f)); }, std::move(deliver));
}

void Scheduler::ProbeRound(ClusterRuntime& cluster, const std::vector<size_t>& member_indexes,
                           bool confirmation, ReadingsDone then) {
  const ClusterSpec& spec = cluster.state.spec;
  const auto deadline = SteadyClock::now() + cluster.state.timing().probe_timeout;
  const size_t n = member_indexes.size();
  auto c = std::make_shared<Collector>();
  c->started = ReadingWindow{WallClock::now(), SteadyClock::now(), SteadyClock::now()};
  c->then = std::move(then);
  c->members.resize(n);
  c->members_missing.assign(n, kNoAnswer);
  c->want_claims.assign(n, false);
  c->claims.resize(n);
  c->claims_missing.assign(n, kNoAnswer);
  // Everything starts before anything is awaited: lock store, PostgreSQL and REST together.
  // The lock store is re-read at confirmation too: a failover's new holder takes the key
  // just before it promotes, so the first round may have read the key before it existed.
  // The previous call of a probe may still be blocked (e.g. in libpq's connect_timeout):
  // that is its answer again, and the round does not wait for it.
  if (cluster.lock_store) {
    c->want_dcs = true;
    ++c->waiting;
    auto deliver = [c](LockRecordResult dcs) {
      c->dcs = std::move(dcs);
      c->Answered();
    };
    if (!LaunchStoreRead(cluster, deadline, std::move(deliver))) {
      --c->waiting;
      c->dcs_missing = kStillRunning;
    }
  }
  // The re-probe's readings are sent together: probes on a thread through one gate, probes on
  // the event loop through another (a cluster's members are all of one kind).
  std::shared_ptr<StartGate> gate;
  std::shared_ptr<LoopGate> loop_gate;
  if (confirmation) {
    const auto on_loop = std::count_if(member_indexes.begin(), member_indexes.end(),
                                       [&](size_t i) { return cluster.members[i]->async; });
    gate = std::make_shared<StartGate>(static_cast<int>(n - on_loop));
    loop_gate = std::make_shared<LoopGate>(static_cast<int>(on_loop));
  }
  for (size_t i = 0; i < n; ++i) {
    const std::shared_ptr<MemberSlot>& shared = cluster.members[member_indexes[i]];
    MemberSlot& slot = *shared;
    c->names.push_back(spec.members[member_indexes[i]].name);
    ++c->waiting;
    if (!LaunchMember(shared, c->names[i], deadline, c->started, gate, loop_gate,
                      [c, i](Observation obs) {
                        c->members[i] = std::move(obs);
                        c->Answered();
                      })) {
      --c->waiting;
      c->members_missing[i] = kStillRunning;
    }
    if (!slot.rest || confirmation) continue;
    c->want_claims[i] = true;
    const bool hold = !slot.rest_timed_out;
    if (hold) ++c->waiting;
    const bool launched =
        LaunchManager(shared, deadline, [c, i, hold, member = shared](PatroniResult claim) {
          const auto* failure = std::get_if<ProbeFailure>(&claim);
          member->rest_timed_out = failure && failure->reason == ProbeFailureReason::kTimeout;
          c->claims[i] = std::move(claim);
          if (hold) c->Answered();
        });
    if (!launched) {
      if (hold) --c->waiting;
      c->claims_missing[i] = kStillRunning;
    } else if (!hold) {
      c->claims_missing[i] = kNotAwaited;
    }
  }
  cluster.collect_timer->Arm(deadline + kCollectGrace, [c] { c->Finish(); });
  c->Answered();  // everything started: the last answer (or the timer) hands over
}

}  // namespace sbd
