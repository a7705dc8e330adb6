#include "detector/engine/fold.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "detector/common/logfmt.h"
#include "detector/remediation/gate.h"
#include "detector/verdicts/fencing.h"
#include "suppressors/transition.h"

namespace sbd {

std::string HolderOf(const LockRecordResult* dcs) {
  if (dcs == nullptr) return "";
  const LockRecord* view = std::get_if<LockRecord>(dcs);
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

void RecordLockStore(ClusterSnapshot& state, const LockRecordResult& dcs,
                     WallClock::time_point at) {
  state.last_dcs = dcs;
  if (const LockRecord* view = std::get_if<LockRecord>(&dcs)) {
    const bool was_down = state.dcs_consecutive_failures > 0;
    const bool rejected_changed =
        !state.last_good_dcs || state.last_good_dcs->rejected != view->rejected;
    if (rejected_changed && !view->rejected.empty()) {
      // The reasons name keys anyone who can write to the store chose: escaped here, once.
      spdlog::warn("cluster={} msg=\"lock store keys skipped as unreadable\" count={} first=\"{}\"",
                   state.spec.name, view->rejected.size(), LogfmtEscape(view->rejected.front()));
    }
    state.last_good_dcs = *view;
    state.last_dcs_success = at;
    state.dcs_consecutive_failures = 0;
    if (was_down) spdlog::info("cluster={} msg=\"lock store readable again\"", state.spec.name);
    // With no ttl in the config, Patroni's own ttl is the one the page must beat.
    if (state.spec.ttl_from_dcs && view->config_ttl && *view->config_ttl > 0) {
      const Timing was = state.timing();
      const Timing now = TimingWithStoreTtl(state.spec, Millis(*view->config_ttl * 1000));
      if (now.interval_source != was.interval_source || now.probe_interval != was.probe_interval) {
        // Said once per change, so an operator who set probe_interval knows it was lowered.
        if (now.probe_interval < state.spec.probe_interval) {
          spdlog::warn(
              "cluster={} msg=\"probe_interval lowered to ttl/10: Patroni's ttl is below three "
              "intervals\" ttl={}ms probe_interval={}ms was={}ms",
              state.spec.name, now.ttl.count(), now.probe_interval.count(),
              was.probe_interval.count());
        } else {
          spdlog::info(
              "cluster={} msg=\"probe_interval back to the configured one\" ttl={}ms "
              "probe_interval={}ms",
              state.spec.name, now.ttl.count(), now.probe_interval.count());
        }
      }
      state.store_timing = now;
    }
    return;
  }
  ++state.dcs_failures;
  if (state.dcs_consecutive_failures++ == 0) {
    spdlog::warn(
        "cluster={} msg=\"cannot read the lock store; still probing PostgreSQL\" "
        "error=\"{}\"",
        state.spec.name, LogfmtEscape(std::get<ProbeFailure>(dcs).message));
  }
}

void FoldRound(ClusterSnapshot& state, RoundReadings& readings, Confirmation confirmation,
               const std::vector<Declaration>& active, WallClock::time_point at) {
  const LockRecordResult* dcs = readings.dcs ? &*readings.dcs : nullptr;
  std::vector<Observation>& round = readings.members;
  const ClusterSpec& spec = state.spec;
  RecordObservations(state, round, at, HolderOf(dcs));
  if (dcs != nullptr) RecordLockStore(state, *dcs, at);
  const LockRecord* view = dcs != nullptr ? std::get_if<LockRecord>(dcs) : nullptr;
  if (view != nullptr) RecordFencing(state.history.fencing, *view, at);
  state.history.lineage = ChooseLineage(spec, state.history, dcs);
  Assessment assessment = Assess(spec, round, state.history, confirmation.confirmed, dcs);
  JudgeFencing(state.history.fencing, view, round, assessment);
  std::optional<TransitionEvidence>& transition = confirmation.transition;
  if (!transition) {
    transition = DescribePrimaryMove(state.last_primary, state.last_primary_timeline,
                                     assessment.writable, round);
  }
  if (assessment.writable.size() == 1) {
    state.last_primary = assessment.writable.front();
    for (const auto& obs : round) {
      if (obs.member == state.last_primary) state.last_primary_timeline = obs.claim()->epoch;
    }
  }
  ApplySuppressors(
      SuppressionInput{spec, round, state.history, active, transition, at, state.timing().ttl},
      assessment);
  if (confirmation.candidate) {
    ++(confirmation.confirmed ? state.confirmations_accepted : state.confirmations_rejected);
  }
  if (transition) RecordTransition(state, *transition, at);
  LogNewSuppressions(spec, state.assessment, assessment);
  RecordVerdict(state, std::move(assessment), at,
                FencedZombieStands(state.remediation.records, state.split_brain_opened_at, round));
  const auto& per_lineage = state.assessment.writable_per_lineage;
  auto in_lineage = per_lineage.find(state.history.lineage);
  state.write_window = AssessWriteWindow(
      spec, state.history,
      state.split_brain_open || (in_lineage != per_lineage.end() && in_lineage->second >= 2));
  state.last_round = std::move(round);
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
  if (!state.split_brain_open) {
    state.split_brain_zombies.clear();
    state.split_brain_holder.clear();
  } else if (!assessment.zombies.empty()) {
    state.split_brain_zombies = assessment.zombies;
    state.split_brain_holder = assessment.lock_holder;
    state.split_brain_zombies_at = at;
  }
  state.assessment = std::move(assessment);
}

Timing TimingOf(const ClusterSpec& spec) {
  Timing timing;
  timing.ttl = spec.ttl;
  timing.probe_interval = spec.probe_interval;
  timing.probe_timeout = spec.probe_timeout;
  timing.ttl_source = spec.ttl_from_dcs ? "default" : "config";
  return timing;
}

Timing TimingWithStoreTtl(const ClusterSpec& spec, Millis store_ttl) {
  Timing timing = TimingOf(spec);
  timing.ttl = store_ttl;
  timing.ttl_source = "lock store";
  if (spec.probe_interval > store_ttl / 3) {
    timing.probe_interval = store_ttl / 10;
    timing.probe_timeout = std::min(spec.probe_timeout, timing.probe_interval);
    timing.interval_source = "ttl/10";
  }
  return timing;
}

void InheritState(const ClusterSnapshot& old, ClusterSnapshot& now) {
  ClusterSnapshot kept = old;
  kept.spec = std::move(now.spec);
  kept.store_timing.reset();  // the new spec's own until the lock store is read again
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
