#include "detector/verdicts/verdict.h"

#include <algorithm>
#include <sstream>

#include "detector/config/claim_words.h"
#include "detector/verdicts/witnesses.h"

namespace sbd {
namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

const MemberHistory* Find(const ClusterHistory& history, const std::string& member) {
  auto it = history.members.find(member);
  return it == history.members.end() ? nullptr : &it->second;
}

}  // namespace

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kHealthy:
      return "healthy";
    case Verdict::kSuppressed:
      return "suppressed";
    case Verdict::kUnknown:
      return "unknown";
    case Verdict::kNoPrimary:
      return "no_primary";
    case Verdict::kDrift:
      return "drift";
    case Verdict::kSuspected:
      return "suspected";
    case Verdict::kSplitBrain:
      return "split_brain";
  }
  return "unknown";
}

int VerdictExitCode(Verdict verdict) {
  switch (verdict) {
    case Verdict::kHealthy:
      return 0;
    case Verdict::kSuppressed:
      return 8;
    case Verdict::kUnknown:
      return 3;
    case Verdict::kNoPrimary:
      return 4;
    case Verdict::kDrift:
      return 5;
    case Verdict::kSuspected:
      return 6;
    case Verdict::kSplitBrain:
      return 7;
  }
  return 3;
}

const std::vector<Verdict>& AllVerdicts() {
  static const std::vector<Verdict> all = {
      Verdict::kHealthy, Verdict::kSuppressed, Verdict::kUnknown,   Verdict::kNoPrimary,
      Verdict::kDrift,   Verdict::kSuspected,  Verdict::kSplitBrain};
  return all;
}

LineageLinks::LineageLinks(const std::vector<Observation>& round) {
  for (const auto& obs : round) {
    if (const auto claim = obs.claim()) Link(claim->lineage, claim->previous_lineage);
  }
}

void LineageLinks::Link(const std::string& lineage, const std::string& previous) {
  if (lineage.empty() || previous.empty()) return;
  const std::string a = Root(lineage);
  const std::string b = Root(previous);
  if (a != b) parent_[std::max(a, b)] = std::min(a, b);
}

std::string LineageLinks::Root(const std::string& id) const {
  std::string at = id;
  // Bounded: each step goes to a strictly smaller id.
  for (auto it = parent_.find(at); it != parent_.end(); it = parent_.find(at)) at = it->second;
  return at;
}

bool LineageLinks::Same(const std::string& a, const std::string& b) const {
  return a == b || (!parent_.empty() && Root(a) == Root(b));
}

void RecordObservation(MemberHistory& history, const Observation& obs, WallClock::time_point at,
                       const std::string& holder) {
  history.last = obs;
  if (!holder.empty() && holder == obs.member) history.last_seen_holding = at;
  if (obs.patroni) {
    if (const auto* claim = std::get_if<PatroniReading>(&*obs.patroni)) {
      history.last_patroni = *claim;
    }
  }
  const std::optional<Claim> claim = obs.claim();
  if (!claim) {
    const ProbeFailureReason reason = obs.failure()->reason;
    if (reason == ProbeFailureReason::kTimeout || reason == ProbeFailureReason::kUnreachable) {
      history.last_unanswered = at;
    }
    ++history.consecutive_failures;
    return;
  }
  history.consecutive_failures = 0;
  history.last_ok = at;
  if (claim->writable()) {
    if (!history.last_known_writable() || !history.writable_since) history.writable_since = at;
    history.last_seen_writable = at;
  } else {
    history.writable_since.reset();
  }
  history.last_claim = *claim;
  if (const PostgresReading* reading = obs.reading()) history.last_reading = *reading;
}

std::string ChooseLineage(const ClusterSpec& spec, const ClusterHistory& history,
                          const LockRecordResult* dcs) {
  if (!spec.system_identifier.empty()) return spec.system_identifier;
  if (dcs != nullptr) {
    if (const LockRecord* view = std::get_if<LockRecord>(dcs); view && !view->initialize.empty()) {
      return view->initialize;
    }
  }
  std::map<std::string, int> votes;
  std::string first_seen;
  for (const auto& member : spec.members) {
    const MemberHistory* h = Find(history, member.name);
    if (h == nullptr || !h->last_claim) continue;
    const std::string& id = h->last_claim->lineage;
    if (first_seen.empty()) first_seen = id;
    ++votes[id];
  }
  for (const auto& [id, count] : votes) {
    if (2 * count > static_cast<int>(spec.members.size())) return id;
  }
  if (!history.lineage.empty()) return history.lineage;
  // No majority and nothing learned yet: the most common, ties to the earliest member's.
  std::string best = first_seen;
  for (const auto& [id, count] : votes) {
    if (count > votes[best]) best = id;
  }
  return best;
}

bool ClaimsOtherScope(const ClusterSpec& spec, const Observation& obs) {
  // Without a scope of its own the cluster has nothing a claim could contradict.
  if (spec.scope.empty() || !obs.patroni) return false;
  const auto* claim = std::get_if<PatroniReading>(&*obs.patroni);
  // An unreadable API claims nothing: the member stays in the scope it is configured under.
  return claim != nullptr && claim->scope != spec.scope;
}

std::vector<std::string> WritableInLineage(const std::vector<Observation>& round,
                                           const std::string& lineage) {
  std::vector<std::string> out;
  const LineageLinks links(round);
  for (const auto& obs : round) {
    if (obs.seen_writable() && links.Same(obs.claim()->lineage, lineage)) {
      out.push_back(obs.member);
    }
  }
  return out;
}

ReadingWindow WritableSpan(const Observation* earlier, const Observation& reprobe) {
  ReadingWindow span = reprobe.window;
  if (earlier == nullptr || !earlier->seen_writable() || !reprobe.seen_writable()) return span;
  const std::string before = earlier->claim()->session;
  if (!before.empty() && before == reprobe.claim()->session &&
      earlier->window.sent <= reprobe.window.sent) {
    span.sent = earlier->window.sent;
    span.sent_wall = earlier->window.sent_wall;
  }
  return span;
}

std::vector<std::string> ConfirmedWritable(const std::vector<Observation>& reprobe,
                                           const std::string& lineage,
                                           const std::vector<Observation>* earlier) {
  struct Candidate {
    const std::string* member;
    ReadingWindow span;
  };
  std::vector<Candidate> writable;
  const LineageLinks links(reprobe);
  for (const auto& obs : reprobe) {
    if (!obs.seen_writable() || !links.Same(obs.claim()->lineage, lineage)) continue;
    const Observation* before = nullptr;
    if (earlier != nullptr) {
      for (const auto& e : *earlier) {
        if (e.member == obs.member) before = &e;
      }
    }
    writable.push_back(Candidate{&obs.member, WritableSpan(before, obs)});
  }
  for (size_t i = 0; i < writable.size(); ++i) {
    for (size_t j = i + 1; j < writable.size(); ++j) {
      if (!writable[i].span.Overlaps(writable[j].span)) continue;
      std::vector<std::string> confirmed = {*writable[i].member, *writable[j].member};
      for (size_t k = j + 1; k < writable.size(); ++k) {
        if (writable[k].span.Overlaps(writable[i].span) &&
            writable[k].span.Overlaps(writable[j].span)) {
          confirmed.push_back(*writable[k].member);
        }
      }
      return confirmed;
    }
  }
  return {};
}

namespace {

// The lock store's answer, as the assessment shows it.
void ReadLock(const LockRecordResult* dcs, Assessment& a) {
  if (dcs == nullptr) return;
  if (const LockRecord* view = std::get_if<LockRecord>(dcs)) {
    a.lock_readable = true;
    a.lock_holder = view->holder;
  } else {
    a.lock_error = std::get<ProbeFailure>(*dcs).message;
  }
}

// Sorts each member of the round into writable (ours or drift), unreadable and suspect.
void ClassifyMembers(const ClusterSpec& spec, const std::vector<Observation>& round,
                     const ClusterHistory& history, Assessment& a) {
  const LineageLinks links(round);
  for (const auto& obs : round) {
    const bool other_scope = ClaimsOtherScope(spec, obs);
    if (other_scope) a.other_scope.push_back(obs.member);
    if (const std::optional<Claim> claim = obs.claim()) {
      const bool ours = links.Same(claim->lineage, a.lineage) && !other_scope;
      if (claim->writable()) {
        ++a.writable_per_lineage[claim->lineage];
        (ours ? a.writable : a.drift).push_back(obs.member);
      } else if (claim->holds && ours) {
        a.fenced.push_back(obs.member);
      }
      continue;
    }
    a.unreadable.push_back(obs.member);
    const MemberHistory* h = Find(history, obs.member);
    // Unreadable now, the last time we could read it it was writable in this lineage, and the
    // failure does not rule writes out (a planned switchover's shutdown does).
    if (h != nullptr && h->last_known_writable() && links.Same(h->last_claim->lineage, a.lineage) &&
        !RulesOutWrites(obs.failure()->reason)) {
      a.suspects.push_back(obs.member);
    }
  }
}

// The writable members that are not the lock holder, once a.writable is known. `dcs` is
// null when the cluster keeps no lock record: then nobody holds anything, and nobody is a
// zombie.
void FindZombies(const LockRecordResult* dcs, const std::vector<Observation>& round,
                 Assessment& a) {
  if (a.lock_readable && !a.lock_holder.empty()) {
    for (const auto& member : a.writable) {
      if (member != a.lock_holder) a.zombies.push_back(member);
    }
  } else if (dcs != nullptr && a.writable.size() >= 2) {
    // A lock is kept but no holder is readable: the holder was promoted onto a new timeline,
    // so the writable members behind the newest timeline are the zombies.
    std::map<std::string, std::int64_t> timelines;
    std::int64_t newest = 0;
    for (const auto& obs : round) {
      if (obs.seen_writable()) timelines[obs.member] = obs.claim()->epoch;
    }
    for (const auto& member : a.writable) newest = std::max(newest, timelines[member]);
    for (const auto& member : a.writable) {
      if (timelines[member] < newest) a.zombies.push_back(member);
    }
  }
}

// The verdict and its one-line summary from the sorted evidence, worst finding first.
void Decide(bool confirmed, const ClaimWords& w, Assessment& a) {
  std::ostringstream summary;
  if (a.writable.size() >= 2 && confirmed) {
    a.verdict = Verdict::kSplitBrain;
    summary << a.writable.size() << " members " << w.many << " at once in lineage " << a.lineage
            << ": " << Join(a.writable) << " (confirmed by an overlapping re-probe)";
    if (!a.zombies.empty() && !a.lock_holder.empty()) {
      summary << "; lock held by " << a.lock_holder << ", zombie: " << Join(a.zombies);
    } else if (!a.zombies.empty()) {
      summary << "; no lock holder readable, zombie by older timeline: " << Join(a.zombies);
    }
  } else if (!a.fenced.empty() && a.writable.size() + a.fenced.size() >= 2) {
    a.verdict = Verdict::kSuspected;
    summary << Join(a.fenced) << " acts as holder but refuses writes (min-replicas-to-write "
            << "unmet): a fenced holder";
    if (!a.writable.empty()) summary << "; " << Join(a.writable) << " is writable";
  } else if (a.writable.size() == 1 && !a.zombies.empty()) {
    a.verdict = Verdict::kSuspected;
    summary << a.writable.front() << " " << w.one << " but " << a.lock_holder
            << " holds the lock: a zombie primary, or a failover in progress";
  } else if (a.writable.size() >= 2) {
    a.verdict = Verdict::kSuspected;
    summary << "writable readings of " << Join(a.writable)
            << " did not overlap in time; not confirmed";
  } else if (a.writable.size() == 1 && !a.suspects.empty()) {
    a.verdict = Verdict::kSuspected;
    summary << a.writable.front() << " " << w.one << " and " << Join(a.suspects)
            << ", last seen writable, cannot be read";
  } else if (!a.drift.empty()) {
    a.verdict = Verdict::kDrift;
    summary << Join(a.drift) << " " << w.many << " with another "
            << (a.other_scope.empty() ? "system identifier than lineage " + a.lineage
                                      : "identity (scope or system identifier)")
            << "; not counted as split brain";
  } else if (!a.unreadable.empty()) {
    a.verdict = Verdict::kUnknown;
    summary << Join(a.unreadable) << " cannot be read";
    if (!a.suspects.empty()) summary << "; " << Join(a.suspects) << " was last seen writable";
    if (a.writable.size() == 1) summary << "; " << a.writable.front() << " " << w.one;
  } else if (a.writable.empty()) {
    a.verdict = Verdict::kNoPrimary;
    summary << "every member read, " << w.none;
  } else {
    a.verdict = Verdict::kHealthy;
    summary << a.writable.front() << " " << w.only;
  }
  a.summary = summary.str();
}

// A split brain or a suspicion names who streams from each writable member (the replicas
// witness which primary they still follow); one nobody follows is on its own.
void AppendWitnesses(const ClusterSpec& spec, const std::vector<Observation>& round,
                     Assessment& a) {
  if (a.verdict != Verdict::kSplitBrain && a.verdict != Verdict::kSuspected) return;
  if (a.writable.empty()) return;
  // Witnesses are PostgreSQL replicas' upstreams; without such readings they say nothing.
  if (std::none_of(round.begin(), round.end(), [](const Observation& o) { return o.reading(); })) {
    return;
  }
  a.summary += "; witnesses: " +
               WitnessText(Witnesses(spec.members, round, a.writable), ": it is on its own");
}

}  // namespace

Assessment Assess(const ClusterSpec& spec, const std::vector<Observation>& round,
                  const ClusterHistory& history, bool confirmed, const LockRecordResult* dcs) {
  Assessment a;
  a.lineage = ChooseLineage(spec, history, dcs);
  a.scope = spec.scope;
  ReadLock(dcs, a);
  ClassifyMembers(spec, round, history, a);
  FindZombies(dcs, round, a);
  Decide(confirmed, ClaimWordsOf(spec.kind), a);
  AppendWitnesses(spec, round, a);
  a.raw_verdict = a.verdict;
  return a;
}

}  // namespace sbd
