#include "probes/probe.h"

namespace sbd {

const char* ReasonName(ProbeFailureReason reason) {
  switch (reason) {
    case ProbeFailureReason::kTimeout:
      return "timeout";
    case ProbeFailureReason::kRefused:
      return "refused";
    case ProbeFailureReason::kUnreachable:
      return "unreachable";
    case ProbeFailureReason::kAuth:
      return "auth";
    case ProbeFailureReason::kProtocol:
      return "protocol";
    case ProbeFailureReason::kQuery:
      return "query";
    case ProbeFailureReason::kConnectionLost:
      return "connection_lost";
    case ProbeFailureReason::kConfig:
      return "config";
    case ProbeFailureReason::kStarting:
      return "starting";
    case ProbeFailureReason::kInternal:
      return "internal";
  }
  return "internal";
}

bool RulesOutWrites(ProbeFailureReason reason) {
  return reason == ProbeFailureReason::kRefused || reason == ProbeFailureReason::kStarting;
}

void StartGate::ArriveAndWait(SteadyClock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (--waiting_for_ <= 0) {
    cv_.notify_all();
    return;
  }
  cv_.wait_until(lock, deadline, [this] { return waiting_for_ <= 0; });
}

void StartGate::Arrive() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--waiting_for_ <= 0) cv_.notify_all();
}

}  // namespace sbd
