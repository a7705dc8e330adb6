#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "probes/event_loop.h"
#include "probes/probe.h"

namespace sbd {

/// The start gate of probes on the event loop: each party, once connected, hands in the
/// function that sends its reading; when the last party has arrived (or left), every send
/// runs in the same loop iteration, so the readings' windows overlap. Loop thread only.
class LoopGate {
 public:
  explicit LoopGate(int parties) : waiting_for_(parties) {}
  /// Marks this party ready; `send` runs once every party is ready or gone.
  void Arrive(std::function<void()> send);
  /// Marks this party gone (failed or out of time) without a send.
  void Leave();

 private:
  void OpenIfAllIn();
  int waiting_for_;
  std::vector<std::function<void()>> sends_;
};

/// A member probe that runs on an EventLoop instead of a thread. The scheduler prefers
/// Start() for such a probe; Probe() is a blocking adapter for callers with a thread to spare.
/// Start() and everything it leads to run on the loop thread; the object itself may be
/// destroyed on any thread (what is in flight is dropped on the loop).
class AsyncMemberProbe : public MemberProbe {
 public:
  /// Receives the observation, on the loop thread, exactly once per Start().
  using Done = std::function<void(Observation)>;

  /// Starts one reading, giving up at `deadline` (a timeout failure); calls `done` by the
  /// deadline. With a `gate`, arrives at it exactly once (ready to send, or gone). Loop
  /// thread only; at most one Start() in flight per instance (the scheduler guarantees it).
  virtual void Start(SteadyClock::time_point deadline, std::shared_ptr<LoopGate> gate,
                     Done done) = 0;

  /// The loop this probe runs on.
  virtual EventLoop& loop() = 0;

  /// Blocking: posts Start() to the loop and waits for its answer. With a `gate`, waits at it
  /// before starting (the connection time then falls inside the window).
  Observation Probe(SteadyClock::time_point deadline, StartGate* gate) override;
};

/// A lock store whose reads run on an EventLoop instead of a pool thread (issue 25): a hung
/// store endpoint then holds no thread. The scheduler prefers Start() for such a store; Read()
/// is a blocking adapter for callers with a thread to spare. Start() and what it leads to run
/// on the loop thread; the object may be destroyed on any thread (what is in flight is dropped
/// on the loop).
class AsyncLockStore : public LockStore {
 public:
  /// Receives the read, on the loop thread, exactly once per Start().
  using Done = std::function<void(std::variant<LockRecord, ProbeFailure>)>;

  /// Starts one read, giving up at `deadline` (a timeout failure); calls `done` by the
  /// deadline. Loop thread only; at most one Start() in flight (the scheduler guarantees it).
  virtual void Start(SteadyClock::time_point deadline, Done done) = 0;

  /// The loop this store reads on.
  virtual EventLoop& loop() = 0;

  /// Blocking: posts Start() to the loop and waits for its answer.
  std::variant<LockRecord, ProbeFailure> Read(SteadyClock::time_point deadline) override;
};

/// A member's manager (Patroni's REST API) read on an EventLoop instead of a pool thread
/// (issue 25): a hung manager then holds no thread. The scheduler prefers Start() for such a
/// probe; Read() is a blocking adapter. Start() and what it leads to run on the loop thread;
/// the object may be destroyed on any thread (what is in flight is dropped on the loop).
class AsyncManagerProbe : public ManagerProbe {
 public:
  /// Receives the reading, on the loop thread, exactly once per Start().
  using Done = std::function<void(std::variant<PatroniReading, ProbeFailure>)>;

  /// Starts one reading, giving up at `deadline` (a timeout failure); calls `done` by the
  /// deadline. Loop thread only; at most one Start() in flight (the scheduler guarantees it).
  virtual void Start(SteadyClock::time_point deadline, Done done) = 0;

  /// The loop this probe reads on.
  virtual EventLoop& loop() = 0;

  /// Blocking: posts Start() to the loop and waits for its answer.
  std::variant<PatroniReading, ProbeFailure> Read(SteadyClock::time_point deadline) override;
};

}  // namespace sbd
