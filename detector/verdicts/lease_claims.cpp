#include "detector/verdicts/lease_claims.h"

namespace sbd {

LeaseRecordView RecordViewOf(const LeaseKeyReading& key) {
  LeaseRecordView view;
  view.lease_left_ms = key.lease_left_ms;
  switch (key.state) {
    case LeaseKeyReading::State::kHeld:
      view.known = !key.token_truncated;
      if (view.known) view.token = key.token;
      break;
    case LeaseKeyReading::State::kGone:
      view.known = true;
      break;
    case LeaseKeyReading::State::kWrongType:
      view.known = false;
      break;
  }
  return view;
}

namespace {

// Intervals that pairwise overlap share an instant, and the latest start among them is one:
// so the largest such set is the set of windows holding some claimer's start.
std::vector<const CandidateClaim*> LargestConcurrentSet(
    const std::vector<const CandidateClaim*>& claimers) {
  std::vector<const CandidateClaim*> best;
  for (const auto* pivot : claimers) {
    const auto instant = pivot->observation.window.sent;
    std::vector<const CandidateClaim*> holding;
    for (const auto* other : claimers) {
      const auto& window = other->observation.window;
      if (window.sent <= instant && instant <= window.received) holding.push_back(other);
    }
    if (holding.size() > best.size()) best = std::move(holding);
  }
  return best;
}

std::optional<std::string> TokenOf(const CandidateClaim& claim) {
  const auto* reading = claim.observation.reading();
  if (reading != nullptr && reading->token.has_value()) return reading->token;
  if (!claim.identity.empty()) return claim.identity;
  return std::nullopt;
}

}  // namespace

LeaseAssessment AssessLeaseClaims(const LeaseRecordView& record,
                                  const std::vector<CandidateClaim>& claims) {
  LeaseAssessment assessment;
  assessment.record_known = record.known;
  std::vector<const CandidateClaim*> claimers;
  for (const auto& claim : claims) {
    if (!claim.observation.claims()) continue;
    claimers.push_back(&claim);
    assessment.claimers.push_back(claim.observation.member);
  }
  for (const auto* claim : LargestConcurrentSet(claimers)) {
    assessment.concurrent.push_back(claim->observation.member);
  }
  for (const auto* claim : claimers) {
    const auto token = TokenOf(*claim);
    if (!token) {
      assessment.unidentified.push_back(claim->observation.member);
      continue;
    }
    if (!record.known) continue;
    if (record.token && *record.token == *token) {
      assessment.named_holder = claim->observation.member;
      continue;
    }
    LeaseZombie zombie;
    zombie.member = claim->observation.member;
    zombie.claimed_token = *token;
    zombie.record_token = record.token.value_or("");
    zombie.record_gone = !record.token.has_value();
    assessment.zombies.push_back(std::move(zombie));
  }
  return assessment;
}

void NameHolderByToken(std::variant<LockRecord, ProbeFailure>& record,
                       const std::vector<Observation>& round) {
  LockRecord* view = std::get_if<LockRecord>(&record);
  if (view == nullptr || !view->holder.empty() || view->holder_token.empty()) return;
  std::vector<std::string> claiming;
  std::vector<std::string> carrying;
  for (const Observation& obs : round) {
    const std::optional<Claim> claim = obs.claim();
    if (!claim || claim->token != view->holder_token) continue;
    (claim->holds ? claiming : carrying).push_back(obs.member);
  }
  const std::vector<std::string>& named = claiming.empty() ? carrying : claiming;
  if (named.size() == 1) view->holder = named.front();
}

}  // namespace sbd
