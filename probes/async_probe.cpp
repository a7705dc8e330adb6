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

std::variant<DcsView, ProbeFailure> AsyncLockStore::Read(SteadyClock::time_point deadline) {
  auto promise = std::make_shared<std::promise<std::variant<DcsView, ProbeFailure>>>();
  auto answer = promise->get_future();
  loop().Post([this, deadline, promise] {
    Start(deadline, [promise](std::variant<DcsView, ProbeFailure> read) {
      promise->set_value(std::move(read));
    });
  });
  // Start() answers by the deadline; the margin covers a loop busy with other reads.
  if (answer.wait_until(deadline + std::chrono::seconds(1)) != std::future_status::ready) {
    return ProbeFailure{ProbeFailureReason::kTimeout, "the event loop did not answer"};
  }
  return answer.get();
}

}  // namespace sbd
