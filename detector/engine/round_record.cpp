// The end of a round: its readings folded into the cluster's state (FoldRound, fold.h), then
// what needs every cluster (lineage forks) or acts (remediation), the round's counters, and the
// members the lock record lists adopted (discovery.h). Scheduler member functions, on the loop
// thread; the state under the scheduler's lock.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "detector/common/logfmt.h"
#include "detector/engine/discovery.h"
#include "detector/engine/fold.h"
#include "detector/engine/scheduler.h"
#include "detector/engine/scheduler_state.h"
#include "detector/remediation/gate.h"
#include "detector/remediation/remediator.h"
#include "detector/verdicts/lease_claims.h"

namespace sbd {

void Scheduler::Remediate(ClusterSnapshot& state, bool undeclared_fork) {
  if (!remediator_) return;
  const ClusterSpec& spec = state.spec;
  const GateDecision decision =
      DecideRemediation(GateInput{spec, state.assessment, state.last_round, undeclared_fork});
  remediator_->Note(spec.name, spec.kind, spec.remediation.mode, decision.hold);
  if (!decision.targets.empty()) {
    RemediationRequest request{spec.name,        spec.kind,       state.split_brain_opened_at,
                               spec.remediation, decision.holder, {},
                               spec.redis.tls,   decision.tokens};
    for (const MemberSpec& member : spec.members) {
      if (std::find(decision.targets.begin(), decision.targets.end(), member.name) !=
          decision.targets.end()) {
        request.targets.push_back(member);
      }
    }
    remediator_->Request(request, WallClock::now());
  }
  state.remediation = remediator_->View(spec.name);
}

void Scheduler::FinishRound(ClusterRuntime& cluster, std::shared_ptr<RoundWork> work) {
  RoundReadings& readings = work->readings;
  // Stores that keep a token name the member claiming with it (application leases).
  if (readings.dcs) NameHolderByToken(*readings.dcs, readings.members);
  work->times.end_wall = WallClock::now();
  const std::vector<Declaration> active = ActiveDeclarations(work->times.end_wall);
  ClusterSnapshot snapshot;
  const RoundListener listener =
      RecordRound(cluster, readings, work->confirmation, active, work->times, snapshot);
  if (readings.dcs) {
    if (const LockRecord* view = std::get_if<LockRecord>(&*readings.dcs))
      AdoptDcsMembers(cluster, *view);
  }
  if (listener) listener(snapshot);
  EndRound(cluster, *work);
}

std::vector<Declaration> Scheduler::ActiveDeclarations(WallClock::time_point at) {
  DeclarationSource declarations;
  {
    std::lock_guard<std::mutex> lock(mu_);
    declarations = declarations_;
  }
  return declarations ? declarations(at) : std::vector<Declaration>{};
}

Scheduler::RoundListener Scheduler::RecordRound(ClusterRuntime& cluster, RoundReadings& readings,
                                                Confirmation confirmation,
                                                const std::vector<Declaration>& active,
                                                const RoundTimes& times,
                                                ClusterSnapshot& snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  ClusterSnapshot& state = cluster.state;
  FoldRound(state, readings, std::move(confirmation), active, times.end_wall);
  UpdateForks(active, times.end_wall);
  const bool undeclared_fork =
      std::any_of(state.forks.begin(), state.forks.end(),
                  [](const LineageFork& f) { return !f.declared_by.has_value(); });
  state.fork_rounds = undeclared_fork ? state.fork_rounds + 1 : 0;
  Remediate(state, undeclared_fork);
  state.has_round = true;
  ++state.rounds;
  state.last_round_start = times.start_wall;
  state.last_round_end = times.end_wall;
  state.last_round_seconds =
      std::chrono::duration<double>(SteadyClock::now() - times.start).count();
  if (listener_) snapshot = state;
  return listener_;
}

void Scheduler::UpdateForks(const std::vector<Declaration>& active, WallClock::time_point now) {
  // Every cluster's round calls this; across thousands of clusters once per 250 ms is enough
  // (a fork must persist for rounds before it warns).
  const auto steady = SteadyClock::now();
  if (clusters_.size() > 1 && steady - forks_updated_ < std::chrono::milliseconds(250)) return;
  forks_updated_ = steady;
  std::vector<LineageSighting> sightings;
  for (const auto& cluster : clusters_) {
    const ClusterSnapshot& c = cluster->state;
    if (!c.has_round) continue;
    const std::string home = c.spec.scope.empty() ? c.spec.name : c.spec.scope;
    for (const auto& obs : c.last_round) {
      if (!obs.seen_writable()) continue;
      std::string unit = home;
      if (obs.patroni) {
        if (const auto* claim = std::get_if<PatroniReading>(&*obs.patroni)) unit = claim->scope;
      }
      sightings.push_back({c.spec.name, unit, home, obs.claim()->lineage, obs.member});
    }
  }
  auto forks = FindLineageForks(sightings, active, now);
  for (auto& cluster : clusters_) {
    ClusterSnapshot& c = cluster->state;
    auto it = forks.find(c.spec.name);
    std::vector<LineageFork> next = it == forks.end() ? std::vector<LineageFork>{} : it->second;
    if (next.size() != c.forks.size()) {
      for (const auto& f : next) {
        spdlog::warn(
            "cluster={} msg=\"lineage writable elsewhere too\" lineage=\"{}\" with=\"{}\" "
            "declared={}",
            c.spec.name, LogfmtEscape(f.lineage),
            LogfmtEscape(f.with.empty() ? "" : f.with.front()),
            f.declared_by ? f.declared_by->id : "no");
      }
    }
    c.forks = std::move(next);
  }
}

void Scheduler::AdoptDcsMembers(ClusterRuntime& cluster, const LockRecord& view) {
  ClusterSpec& spec = cluster.state.spec;
  const auto now = WallClock::now();
  DiscoveryPlan plan = PlanDiscovery(
      spec, view, [&cluster](size_t i) { return cluster.members[i]->rest != nullptr; });
  bool added = false;
  for (const auto& [index, url] : plan.managers) {
    std::lock_guard<std::mutex> lock(mu_);
    spec.members[index].patroni_url = url;
    cluster.members[index]->rest = factories_.managers(spec, spec.members[index]);
    added = true;  // a manager that reads on the pool needs its thread
  }
  for (MemberSpec& member : plan.added) {
    AddMemberSlot(cluster, std::move(member));
    added = true;
  }
  if (added) SizeExecutor();
  TrackAbsence(spec, view, cluster.absent_since, now);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i : ExpireDiscovered(cluster.state, cluster.absent_since, now)) {
    cluster.members.erase(cluster.members.begin() + static_cast<std::ptrdiff_t>(i));
  }
  RecordDiscoveryRejected(cluster.state, std::move(plan.rejected));
}

}  // namespace sbd
