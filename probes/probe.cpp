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

Claim ClaimOf(const PostgresReading& reading) {
  Claim claim;
  claim.holds = reading.writable();
  claim.lineage = reading.system_identifier;
  claim.epoch = reading.timeline;
  if (reading.backend_pid != 0) {
    claim.session = std::to_string(reading.backend_pid) + "@" + reading.postmaster_start;
  }
  return claim;
}

Claim ClaimOf(const RedisReading& reading) {
  Claim claim;
  claim.holds = reading.role == "master";
  claim.fenced = claim.holds && reading.writes_blocked();
  claim.lineage = reading.master_replid;
  claim.previous_lineage = reading.master_replid2;
  claim.previous_lineage_offset = reading.second_repl_offset;
  return claim;
}

Claim ClaimOf(const LockClaimReading& reading) {
  Claim claim;
  claim.holds = reading.claims;
  claim.lineage = reading.lock;
  claim.token = reading.token;
  return claim;
}

std::optional<Claim> Observation::claim() const {
  if (const auto* r = reading()) return ClaimOf(*r);
  if (const auto* r = redis()) return ClaimOf(*r);
  if (const auto* r = lock_claim()) return ClaimOf(*r);
  return std::nullopt;
}

bool Observation::seen_writable() const {
  if (const auto* r = reading()) return r->writable();
  const auto c = claim();
  return c && c->writable();
}

bool Observation::seen_fenced() const {
  const auto c = claim();
  return c && c->holds && c->fenced;
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
