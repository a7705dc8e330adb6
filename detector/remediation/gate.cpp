#include "detector/remediation/gate.h"

#include <algorithm>

namespace sbd {

namespace {

const Observation* Find(const std::vector<Observation>& round, const std::string& member) {
  for (const Observation& obs : round) {
    if (obs.member == member) return &obs;
  }
  return nullptr;
}

bool ReadWritable(const std::vector<Observation>& round, const std::string& member) {
  const Observation* obs = Find(round, member);
  return obs != nullptr && obs->ok() && obs->seen_writable();
}

bool Contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// Why a round that is not a plain confirmed split brain gets no action; empty when there is
// nothing an operator would expect one for.
std::string VerdictHold(const Assessment& a) {
  if (a.suppressed_split_brain ||
      (a.verdict == Verdict::kSuppressed && a.raw_verdict == Verdict::kSplitBrain)) {
    return "a declaration covers the split brain";
  }
  if (a.verdict == Verdict::kSuspected) {
    return "a suspected split brain (a member unreadable) is never acted on";
  }
  if (a.verdict != Verdict::kSplitBrain) return "";
  if (a.split_brain_fenced) return "every zombie is already fenced by its token";
  return "";
}

// The lock store's side: read this round, naming a holder read writable in the same round.
std::string StoreHold(const Assessment& a, const std::vector<Observation>& round) {
  if (!a.fencing_regressions.empty()) {
    return "a fencing token or the lock store's revision went back: " + a.fencing_regressions[0];
  }
  if (!a.lock_readable) {
    return "the lock store was not read this round" +
           (a.lock_error.empty() ? std::string() : ": " + a.lock_error);
  }
  if (a.lock_holder.empty()) return "the lock store names no holder";
  if (!ReadWritable(round, a.lock_holder)) {
    return "the holder " + a.lock_holder + " was not read writable this round";
  }
  return "";
}

}  // namespace

bool ActsAsPrimary(const Observation& obs) {
  if (const PostgresReading* pg = obs.reading()) return !pg->in_recovery;
  const std::optional<Claim> claim = obs.claim();
  return claim && claim->holds;
}

GateDecision DecideRemediation(const GateInput& in) {
  GateDecision decision;
  const Assessment& a = in.assessment;
  decision.hold = VerdictHold(a);
  if (in.spec.remediation.mode == RemediationMode::kOff || a.verdict != Verdict::kSplitBrain ||
      !decision.hold.empty()) {
    if (in.spec.remediation.mode == RemediationMode::kOff) decision.hold.clear();
    return decision;
  }
  if (in.undeclared_fork) {
    decision.hold = "the lineage is writable in another cluster too (a fork)";
    return decision;
  }
  decision.hold = StoreHold(a, in.round);
  if (!decision.hold.empty()) return decision;
  decision.holder = a.lock_holder;
  for (const std::string& zombie : a.zombies) {
    if (zombie == a.lock_holder || !Contains(a.writable, zombie)) continue;
    if (Contains(a.fenced_zombies, zombie) || Contains(a.fenced, zombie)) continue;
    if (ReadWritable(in.round, zombie)) decision.targets.push_back(zombie);
  }
  if (decision.targets.empty()) {
    decision.hold = "no zombie read writable this round";
    return decision;
  }
  for (const Observation& obs : in.round) {
    if (obs.member != decision.holder && !Contains(decision.targets, obs.member)) continue;
    const std::optional<Claim> claim = obs.claim();
    if (claim && !claim->token.empty()) decision.tokens[obs.member] = claim->token;
  }
  return decision;
}

}  // namespace sbd
