#include "detector/engine/fold.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "detector/common/logfmt.h"

namespace sbd {

std::string HolderOf(const DcsResult* dcs) {
  if (dcs == nullptr) return "";
  const DcsView* view = std::get_if<DcsView>(dcs);
  return view != nullptr ? view->holder : "";
}

void RecordObservations(ClusterSnapshot& state, const std::vector<Observation>& round,
                        WallClock::time_point at, const std::string& holder) {
  for (const auto& obs : round) {
    RecordObservation(state.history.members[obs.member], obs, at, holder);
    MemberCounters& counters = state.counters[obs.member];
    ++counters.probes;
    counters.last_duration_seconds = obs.window.Seconds();
    if (const ProbeFailure* failure = obs.failure()) {
      ++counters.failures_by_reason[ReasonName(failure->reason)];
    }
    if (obs.patroni) {
      if (const auto* failure = std::get_if<ProbeFailure>(&*obs.patroni)) {
        ++counters.rest_failures_by_reason[ReasonName(failure->reason)];
      }
    }
  }
}

void RecordTransition(ClusterSnapshot& state, const TransitionEvidence& transition,
                      WallClock::time_point at) {
  ++state.transitions;
  state.last_transition = transition;
  state.last_transition_at = at;
  spdlog::info("cluster={} msg=\"transition, not a split brain\" evidence=\"{}\"", state.spec.name,
               LogfmtEscape(transition.summary));
}

void LogNewSuppressions(const ClusterSpec& spec, const Assessment& previous,
                        const Assessment& assessment) {
  for (const auto& s : assessment.suppressions) {
    const bool changed = s.suppressor == "provisioning";
    const bool was = std::any_of(
        previous.suppressions.begin(), previous.suppressions.end(), [&](const Suppression& old) {
          return old.suppressor == s.suppressor && old.declaration_id == s.declaration_id &&
                 old.hidden == s.hidden;
        });
    if (changed && !was) {
      spdlog::warn(
          "cluster={} msg=\"finding suppressed\" hidden={} suppressor={} kind={} "
          "declaration={} reason=\"{}\" expires={}",
          spec.name, s.hidden, s.suppressor, s.kind, s.declaration_id, LogfmtEscape(s.reason),
          FormatRfc3339(s.expires));
    }
  }
}

void RecordVerdict(ClusterSnapshot& state, Assessment assessment, WallClock::time_point at,
                   bool fenced_zombie_stands) {
  if (!state.has_round || assessment.verdict != state.assessment.verdict) {
    state.verdict_since = at;
    state.verdict_rounds = 0;
    spdlog::log(assessment.verdict == Verdict::kHealthy ? spdlog::level::info : spdlog::level::warn,
                "cluster={} verdict={} lineage=\"{}\" summary=\"{}\"", state.spec.name,
                VerdictName(assessment.verdict), LogfmtEscape(assessment.lineage),
                LogfmtEscape(assessment.summary));
  }
  ++state.verdict_rounds;
  // A split brain the resource fences (every zombie's token refused) warns: no incident.
  if (assessment.verdict == Verdict::kSplitBrain && !assessment.split_brain_fenced) {
    if (!state.split_brain_open) state.split_brain_opened_at = at;
    state.split_brain_open = true;
  } else if (assessment.unreadable.empty() && assessment.writable.size() <= 1 &&
             !(state.split_brain_open && fenced_zombie_stands)) {
    state.split_brain_open = false;
  }
  state.assessment = std::move(assessment);
}

void InheritState(const ClusterSnapshot& old, ClusterSnapshot& now) {
  ClusterSnapshot kept = old;
  kept.spec = std::move(now.spec);
  kept.lock = std::move(now.lock);
  kept.watch = std::move(now.watch);
  kept.last_dcs.reset();
  kept.write_window.reset();
  kept.discovery_rejected.clear();
  kept.history.members = std::move(now.history.members);
  kept.counters = std::move(now.counters);
  for (const auto& member : kept.spec.members) {
    if (auto it = old.history.members.find(member.name); it != old.history.members.end()) {
      kept.history.members[member.name] = it->second;
    }
    if (auto it = old.counters.find(member.name); it != old.counters.end()) {
      kept.counters[member.name] = it->second;
    }
  }
  const auto dropped = [&](const Observation& obs) {
    return std::none_of(kept.spec.members.begin(), kept.spec.members.end(),
                        [&](const MemberSpec& m) { return m.name == obs.member; });
  };
  kept.last_round.erase(std::remove_if(kept.last_round.begin(), kept.last_round.end(), dropped),
                        kept.last_round.end());
  now = std::move(kept);
}

}  // namespace sbd
