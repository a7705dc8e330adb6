#include "suppressors/transition.h"

#include <algorithm>

namespace sbd {

namespace {

// What became of a member that read writable, from PostgreSQL's readings.
std::string PostgresClause(const std::string& member, const PostgresReading& was,
                           const PostgresReading& now) {
  if (now.in_recovery) {
    return member + " demoted (in recovery on timeline " + std::to_string(now.timeline) + ")";
  }
  if (now.postmaster_start != was.postmaster_start) return member + " restarted";
  if (now.timeline > was.timeline) {
    return member + " promoted onto timeline " + std::to_string(now.timeline);
  }
  if (!now.writable()) return member + " turned read-only";
  return "";
}

// The same from any kind's claims: empty while it still holds and takes writes.
std::string ClaimClause(const std::string& member, const Claim& now) {
  if (!now.holds) return member + " demoted (no longer holds)";
  if (now.fenced) return member + " fenced (refuses writes)";
  return "";
}

// How long `member` has been writable by `history` (which does not hold this round yet): zero
// when it was not writable before this round.
Millis WritableFor(const ClusterHistory& history, const std::string& member,
                   WallClock::time_point now) {
  auto it = history.members.find(member);
  if (it == history.members.end() || !it->second.last_known_writable() ||
      !it->second.writable_since || *it->second.writable_since > now) {
    return Millis(0);
  }
  return std::chrono::duration_cast<Millis>(now - *it->second.writable_since);
}

}  // namespace

std::optional<TransitionEvidence> DescribeTransition(const std::vector<Observation>& first,
                                                     const std::vector<Observation>& reprobe) {
  TransitionEvidence evidence;
  bool explained = false;
  for (const Observation& after : reprobe) {
    const Observation* before = nullptr;
    for (const auto& obs : first) {
      if (obs.member == after.member) before = &obs;
    }
    if (before == nullptr || !before->seen_writable()) continue;
    evidence.members.push_back(after.member);
    std::string clause;
    if (const auto now = after.claim()) {
      const PostgresReading* was = before->reading();
      clause = was != nullptr && after.reading() != nullptr
                   ? PostgresClause(after.member, *was, *after.reading())
                   : ClaimClause(after.member, *now);
      if (clause.empty()) {
        clause = after.member + " still writable";
        if (after.reading()) clause += " on timeline " + std::to_string(now->epoch);
        if (!evidence.summary.empty()) evidence.summary += "; ";
        evidence.summary += clause;
        continue;
      }
    } else if (RulesOutWrites(after.failure()->reason)) {
      clause = after.member + " going down (" + ReasonName(after.failure()->reason) + ")";
    } else {
      // A timeout or a cut connection explains nothing: it may be the zombie, frozen.
      return std::nullopt;
    }
    explained = true;
    if (!evidence.summary.empty()) evidence.summary += "; ";
    evidence.summary += clause;
  }
  if (!explained) return std::nullopt;
  evidence.from_candidate = true;
  return evidence;
}

std::optional<TransitionEvidence> DescribeHandover(const LockRecord& record,
                                                   const std::vector<std::string>& writable,
                                                   const ClusterHistory& history,
                                                   WallClock::time_point now, Millis ttl) {
  const auto holder = std::find(writable.begin(), writable.end(), record.holder);
  if (record.holder.empty() || holder == writable.end()) return std::nullopt;
  // A member back from not answering (frozen, partitioned) within the last TTL is the
  // zombie the store has not dealt with: never excused, whichever side of the move it is on.
  for (const auto& member : writable) {
    auto it = history.members.find(member);
    if (it != history.members.end() && it->second.last_unanswered &&
        *it->second.last_unanswered > now - ttl) {
      return std::nullopt;
    }
  }
  TransitionEvidence evidence;
  evidence.members = writable;
  evidence.from_candidate = true;
  evidence.from_store = true;
  const std::string epoch = " (epoch " + std::to_string(record.mod_revision) + ")";
  for (const auto& member : writable) {
    if (member == record.holder) continue;
    if (!evidence.summary.empty()) evidence.summary += "; ";
    // The store's word that it is moving the lock explains a member writable for its own
    // bound at most (none without a bound); past it, only the previous holder's case remains.
    const Millis writable_for = WritableFor(history, member, now);
    if (record.handover_in_progress && record.handover_bound > Millis(0) &&
        writable_for <= record.handover_bound) {
      evidence.summary += "the lock store is moving the lock" + epoch + ": " + member +
                          " writable beside " + record.holder + " for " +
                          std::to_string(writable_for.count()) + " ms of the " +
                          std::to_string(record.handover_bound.count()) + " ms bound";
      continue;
    }
    if (member != record.previous_holder || !record.holder_changed_at) return std::nullopt;
    const auto since = now - *record.holder_changed_at;
    if (since > record.handover_bound) return std::nullopt;
    auto it = history.members.find(member);
    if (it == history.members.end() ||
        (it->second.last_unanswered &&
         *it->second.last_unanswered > *record.holder_changed_at - ttl)) {
      return std::nullopt;
    }
    const long long ms = std::chrono::duration_cast<Millis>(since).count();
    evidence.summary += member + " held the lock until " + std::to_string(ms) + " ms ago" + epoch +
                        " and awaits the store's demotion of it; " + record.holder +
                        " holds it now";
  }
  return evidence;
}

std::optional<TransitionEvidence> DescribePrimaryMove(const std::string& previous,
                                                      std::int64_t previous_timeline,
                                                      const std::vector<std::string>& writable,
                                                      const std::vector<Observation>& round) {
  if (previous.empty() || writable.size() != 1 || writable.front() == previous) return std::nullopt;
  TransitionEvidence evidence;
  evidence.members = {previous, writable.front()};
  evidence.summary = "primary moved from " + previous + " (timeline " +
                     std::to_string(previous_timeline) + ") to " + writable.front();
  for (const auto& obs : round) {
    if (obs.member == writable.front() && obs.reading()) {
      evidence.summary += " (timeline " + std::to_string(obs.reading()->timeline) + ")";
    }
  }
  for (const auto& obs : round) {
    if (obs.member != previous) continue;
    if (const PostgresReading* r = obs.reading()) {
      evidence.summary += r->in_recovery ? "; " + previous + " is a replica now" : "";
    } else if (const auto claim = obs.claim()) {
      evidence.summary += claim->holds ? "" : "; " + previous + " is a replica now";
    } else {
      evidence.summary +=
          "; " + previous + " unreadable (" + ReasonName(obs.failure()->reason) + ")";
    }
  }
  return evidence;
}

void TransitionSuppressor::Apply(const SuppressionInput& in, Assessment& a) const {
  // Only a candidate was kept from paging; a completed move is counted, not suppressed.
  if (!in.transition || !in.transition->from_candidate) return;
  Suppression s;
  s.suppressor = name();
  s.reason = "switchover or failover: " + in.transition->summary;
  s.hidden = VerdictName(Verdict::kSuspected);
  s.members = in.transition->members;
  // Evidence, not a declaration: it lapses one TTL after it was seen.
  s.expires = in.now + in.ttl;
  a.suppressions.push_back(std::move(s));
  // A store's handover lasts many rounds (Sentinel: seconds); it is shown, counted, bounded
  // by the store's own limit, and not a suspicion that would warn.
  if (in.transition->from_store && a.verdict == Verdict::kSuspected)
    a.verdict = Verdict::kSuppressed;
}

}  // namespace sbd
