#include "probes/async_probe.h"

#include <future>

namespace sbd {

void LoopGate::Arrive(std::function<void()> send) {
  sends_.push_back(std::move(send));
  --waiting_for_;
  OpenIfAllIn();
}

void LoopGate::Leave() {
  --waiting_for_;
  OpenIfAllIn();
}

void LoopGate::OpenIfAllIn() {
  if (waiting_for_ > 0) return;
  // Sends may arrive at another gate's probe; move them out before running any.
  auto sends = std::move(sends_);
  sends_.clear();
  for (auto& send : sends) send();
}

Observation AsyncMemberProbe::Probe(SteadyClock::time_point deadline, StartGate* gate) {
  if (gate != nullptr) gate->ArriveAndWait(deadline);
  auto promise = std::make_shared<std::promise<Observation>>();
  auto answer = promise->get_future();
  loop().Post([this, deadline, promise] {
    Start(deadline, nullptr, [promise](Observation obs) { promise->set_value(std::move(obs)); });
  });
  // Start() answers by the deadline; the margin covers a loop busy with other members.
  if (answer.wait_until(deadline + std::chrono::seconds(1)) != std::future_status::ready) {
    Observation obs;
    obs.member = "";
    obs.window.sent_wall = WallClock::now();
    obs.window.sent = obs.window.received = SteadyClock::now();
    obs.result = ProbeFailure{ProbeFailureReason::kTimeout, "the event loop did not answer"};
    return obs;
  }
  return answer.get();
}

namespace {

// Posts `start` to `loop` and waits for the answer it hands on, by `deadline` plus a margin
// for a loop busy with other reads.
template <typename T>
T WaitOnLoop(EventLoop& loop, SteadyClock::time_point deadline,
             std::function<void(std::function<void(T)>)> start) {
  auto promise = std::make_shared<std::promise<T>>();
  auto answer = promise->get_future();
  loop.Post([start = std::move(start), promise] {
    start([promise](T read) { promise->set_value(std::move(read)); });
  });
  if (answer.wait_until(deadline + std::chrono::seconds(1)) != std::future_status::ready) {
    return ProbeFailure{ProbeFailureReason::kTimeout, "the event loop did not answer"};
  }
  return answer.get();
}

}  // namespace

std::variant<LockRecord, ProbeFailure> AsyncLockStore::Read(SteadyClock::time_point deadline) {
  using Read = std::variant<LockRecord, ProbeFailure>;
  return WaitOnLoop<Read>(loop(), deadline, [this, deadline](std::function<void(Read)> done) {
    Start(deadline, done);
  });
}

std::variant<PatroniReading, ProbeFailure> AsyncManagerProbe::Read(
    SteadyClock::time_point deadline) {
  using Reading = std::variant<PatroniReading, ProbeFailure>;
  return WaitOnLoop<Reading>(loop(), deadline, [this, deadline](std::function<void(Reading)> done) {
    Start(deadline, done);
  });
}

}  // namespace sbd
