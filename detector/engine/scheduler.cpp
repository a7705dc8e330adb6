#include "detector/engine/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>

#include "detector/common/internal_errors.h"
#include "detector/common/logfmt.h"
#include "detector/common/network_text.h"
#include "detector/engine/confirmation.h"
#include "detector/engine/discovery.h"
#include "detector/engine/fold.h"
#include "detector/engine/scheduler_state.h"
#include "detector/remediation/gate.h"
#include "detector/remediation/remediator.h"
#include "detector/verdicts/fencing.h"
#include "detector/verdicts/lease_claims.h"
#include "probes/async_probe.h"
#include "probes/http_json.h"
#include "suppressors/transition.h"

namespace sbd {

Scheduler::Scheduler(const ValidatedConfig& config, ProbeFactories factories)
    : factories_(std::move(factories)), loop_(EventLoop::Shared()) {
  executor_ = std::make_unique<ProbeExecutor>(2);
  for (const auto& spec : config.clusters()) {
    auto cluster = std::make_unique<ClusterRuntime>();
    cluster->state.spec = spec;
    cluster->state.spec.members.clear();
    for (const auto& member : spec.members) AddMemberSlot(*cluster, member);
    cluster->lock_store = factories_.lock_stores(spec);
    cluster->state.lock = DescribeLock(spec, cluster->lock_store != nullptr);
    clusters_.push_back(std::move(cluster));
  }
  SizeExecutor();
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::AddMemberSlot(ClusterRuntime& cluster, MemberSpec member) {
  auto slot = std::make_shared<MemberSlot>();
  slot->probe = factories_.members(cluster.state.spec, member);
  slot->async = dynamic_cast<AsyncMemberProbe*>(slot->probe.get());
  slot->rest = factories_.managers(cluster.state.spec, member);
  std::lock_guard<std::mutex> lock(mu_);
  cluster.members.push_back(std::move(slot));
  cluster.state.counters.emplace(member.name, MemberCounters{});
  cluster.state.spec.members.push_back(std::move(member));
}

void Scheduler::SizeExecutor() {
  // A call holds a thread at most until its deadline (or libpq's connect_timeout), and a busy
  // probe is never called twice, so one thread per concurrent call can never starve anyone:
  // the lock store, and the member probe plus the manager for each member. A member probe on
  // the event loop needs no thread. A cluster with a lock store may learn managers and new
  // members from its record: it keeps room for the calls of five members at least, so that
  // the first discoveries need no new threads. Up to kMaxProbeThreads, whatever the number of
  // clusters: past it, calls wait in the executor's queue, and one that is still waiting at
  // its deadline answers a timeout ("not started before the deadline") without running, so a
  // saturated pool makes readings fail (unreadable, never healthy) and never stalls a round.
  // A cluster whose every read is on the event loop (its lock store, each member probe and
  // each manager) reserves no thread at all: its discoveries will read there too, and one
  // that brings a blocking probe sizes the pool again (AdoptDcsMembers).
  const auto all_on_loop = [](const ClusterRuntime& cluster) {
    const bool store_on_loop =
        !cluster.lock_store || dynamic_cast<AsyncLockStore*>(cluster.lock_store.get()) != nullptr;
    return store_on_loop &&
           std::all_of(cluster.members.begin(), cluster.members.end(), [](const auto& member) {
             return member->async != nullptr &&
                    (!member->rest || dynamic_cast<AsyncManagerProbe*>(member->rest.get()));
           });
  };
  size_t calls = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (const auto& cluster : clusters_) {
    if (all_on_loop(*cluster)) continue;
    const bool on_loop = !cluster->members.empty() && cluster->members.front()->async;
    if (cluster->lock_store) {
      calls += 1 + (on_loop ? 1 : 2) * std::max<size_t>(cluster->members.size(), 5);
      continue;
    }
    for (const auto& member : cluster->members) {
      calls += (member->rest ? 1 : 0) + (member->async ? 0 : 1);
    }
  }
  lock.unlock();
  executor_->EnsureThreads(std::max<size_t>(2, calls));
}

void Scheduler::Inherit(const std::vector<ClusterSnapshot>& previous) {
  for (auto& cluster : clusters_) {
    ClusterSnapshot& now = cluster->state;
    auto old = std::find_if(previous.begin(), previous.end(),
                            [&](const ClusterSnapshot& s) { return s.spec.name == now.spec.name; });
    if (old == previous.end()) continue;
    // Discovered members stay watched: a zombie's DCS key expires with its lease, so the DCS
    // alone would never list it again.
    for (const auto& member : old->spec.members) {
      const bool configured =
          std::any_of(now.spec.members.begin(), now.spec.members.end(),
                      [&](const MemberSpec& m) { return m.name == member.name; });
      if (!configured && member.discovered && now.spec.discovery.enabled &&
          DiscoveredCount(now.spec) < static_cast<size_t>(now.spec.discovery.max_members)) {
        // The new discovery settings (dsn, credentials) apply; the address is the one found.
        AddMemberSlot(*cluster, DiscoveredAt(now.spec, member.name, SplitHostPort(member.address),
                                             member.patroni_url));
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    InheritState(*old, now);
  }
  SizeExecutor();
}
void Scheduler::SetRoundListener(RoundListener listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listener_ = std::move(listener);
}

void Scheduler::SetDeclarationSource(DeclarationSource source) {
  std::lock_guard<std::mutex> lock(mu_);
  declarations_ = std::move(source);
}

void Scheduler::SetRemediator(std::shared_ptr<Remediator> remediator) {
  std::lock_guard<std::mutex> lock(mu_);
  remediator_ = std::move(remediator);
}

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

namespace {

// Runs `task` on the loop thread and waits for it (at once when already there).
void RunOnLoopAndWait(EventLoop& loop, const std::function<void()>& task) {
  if (loop.OnLoopThread()) {
    task();
    return;
  }
  auto ran = std::make_shared<std::promise<void>>();
  std::future<void> done = ran->get_future();
  loop.Post([&task, ran] {
    Guarded("scheduler", task);
    ran->set_value();
  });
  done.wait();
}

}  // namespace

void Scheduler::Start() {
  StartWatches();
  started_ = true;
  loop_.Post([this] {
    // The first rounds are spread, at most 2 ms apart and within one interval, so that a large
    // fleet does not open every connection in the same loop iteration (a connect storm at a
    // pooler times the first rounds out); rounds keep that phase afterwards.
    const auto now = SteadyClock::now();
    const auto count = static_cast<long>(clusters_.size());
    for (long i = 0; i < count; ++i) {
      ClusterRuntime& cluster = *clusters_[static_cast<size_t>(i)];
      const auto step = std::min<SteadyClock::duration>(std::chrono::milliseconds(2),
                                                        cluster.state.spec.probe_interval / count);
      cluster.next = now + step * i;
      if (i == 0) {
        StartRound(cluster, true, nullptr);
        continue;
      }
      if (!cluster.round_timer) {
        cluster.round_timer = std::make_unique<LoopTimer>(loop_);
        cluster.collect_timer = std::make_unique<LoopTimer>(loop_);
      }
      cluster.round_timer->Arm(cluster.next,
                               [this, c = &cluster] { StartRound(*c, true, nullptr); });
    }
  });
}

void Scheduler::Stop() {
  std::vector<std::unique_ptr<LockWatch>> watches;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& cluster : clusters_) watches.push_back(std::move(cluster->watch));
  }
  // Outside the lock: a watch's thread may be waiting for it in Wake().
  watches.clear();
  // After this runs no round starts (each checks stopping_ on the loop); those under way end
  // by their deadlines.
  RunOnLoopAndWait(loop_, [this] {
    for (auto& cluster : clusters_) {
      if (cluster->round_timer) cluster->round_timer->Stop();
    }
  });
  {
    std::unique_lock<std::mutex> lock(mu_);
    rounds_cv_.wait(lock, [this] { return rounds_in_flight_ == 0; });
  }
  RunOnLoopAndWait(loop_, [this] {
    for (auto& cluster : clusters_) {
      cluster->round_timer.reset();
      cluster->collect_timer.reset();
    }
  });
}

void Scheduler::RunOnce() {
  struct Waiting {
    std::mutex mu;
    std::condition_variable cv;
    size_t rounds = 0;
  };
  auto waiting = std::make_shared<Waiting>();
  waiting->rounds = clusters_.size();
  for (auto& cluster : clusters_) {
    RequestRound(*cluster, [waiting] {
      std::lock_guard<std::mutex> lock(waiting->mu);
      if (--waiting->rounds == 0) waiting->cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(waiting->mu);
  waiting->cv.wait(lock, [&] { return waiting->rounds == 0; });
}

void Scheduler::RequestRound(ClusterRuntime& cluster, std::function<void()> done) {
  loop_.Post([this, &cluster, done = std::move(done)]() mutable {
    StartRound(cluster, false, std::move(done));
  });
}

void Scheduler::StartRound(ClusterRuntime& cluster, bool on_timer, std::function<void()> done,
                           bool follow_up) {
  if (stopping_) {
    if (done) done();
    return;
  }
  if (done) cluster.waiting_next.push_back(std::move(done));
  if (cluster.in_round) {
    cluster.again = true;  // right after the one under way
    return;
  }
  if (!cluster.round_timer) {
    cluster.round_timer = std::make_unique<LoopTimer>(loop_);
    cluster.collect_timer = std::make_unique<LoopTimer>(loop_);
  }
  cluster.round_timer->Stop();
  cluster.in_round = true;
  cluster.waiting_this.swap(cluster.waiting_next);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++rounds_in_flight_;
    if (cluster.watch) cluster.state.watch = cluster.watch->Status();
  }
  auto work = std::make_shared<RoundWork>();
  work->on_timer = on_timer;
  work->follow_up = follow_up;
  work->times.start_wall = WallClock::now();
  work->times.start = SteadyClock::now();
  std::vector<size_t> everyone(cluster.state.spec.members.size());
  for (size_t i = 0; i < everyone.size(); ++i) everyone[i] = i;
  const bool launched = Guarded("round", [&] {
    ProbeRound(cluster, everyone, false, [this, &cluster, work](RoundReadings readings) {
      if (work->ended) return;
      work->readings = std::move(readings);
      if (!Guarded("round", [&] { AfterReadings(cluster, work); })) EndRound(cluster, *work);
    });
  });
  if (!launched) EndRound(cluster, *work);
}

void Scheduler::EndRound(ClusterRuntime& cluster, RoundWork& work) {
  if (work.ended) return;
  work.ended = true;
  cluster.in_round = false;
  if (cluster.collect_timer) cluster.collect_timer->Stop();
  std::vector<std::function<void()>> waiting;
  waiting.swap(cluster.waiting_this);
  for (auto& done : waiting) Guarded("round waiter", done);
  const bool again = cluster.again;
  const bool again_follow_up = cluster.again_follow_up;
  cluster.again = false;
  cluster.again_follow_up = false;
  SteadyClock::time_point follow_up = SteadyClock::time_point::max();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = SteadyClock::now();
    if (started_ && !work.follow_up) {
      // Read each time: with no ttl in the config, the interval follows the lock store's.
      cluster.next =
          (work.on_timer ? cluster.next : work.times.start) + cluster.state.spec.probe_interval;
      if (cluster.next < now) {
        // The round ran past the next slot: start at once rather than firing a burst.
        ++cluster.state.overruns;
        cluster.next = now;
      }
    }
    if (started_) follow_up = NextFollowUp(cluster, now);
    if (again && again_follow_up) ++cluster.state.follow_up_rounds;
    --rounds_in_flight_;
  }
  rounds_cv_.notify_all();
  if (stopping_) return;
  if (again) {
    StartRound(cluster, false, nullptr, again_follow_up);
  } else if (started_) {
    ArmNextRound(cluster, follow_up);
  }
}

void Scheduler::ArmNextRound(ClusterRuntime& cluster, SteadyClock::time_point follow_up) {
  if (follow_up < cluster.next) {
    // A woken cluster that has not settled: a follow-up round before the timed one, which
    // keeps its slot.
    cluster.round_timer->Arm(follow_up, [this, &cluster] {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++cluster.state.follow_up_rounds;
      }
      StartRound(cluster, false, nullptr, true);
    });
    return;
  }
  cluster.round_timer->Arm(cluster.next, [this, &cluster] { StartRound(cluster, true, nullptr); });
}

std::vector<ClusterSnapshot> Scheduler::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ClusterSnapshot> out;
  out.reserve(clusters_.size());  // each snapshot copied once, never again as the vector grows
  for (const auto& cluster : clusters_) {
    out.push_back(cluster->state);
    if (cluster->watch) out.back().watch = cluster->watch->Status();
  }
  return out;
}

bool Scheduler::AllClustersHaveRun() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& cluster : clusters_) {
    if (!cluster->state.has_round) return false;
  }
  return true;
}

void Scheduler::StartWatches() {
  for (auto& cluster : clusters_) {
    if (!cluster->lock_store || !cluster->state.spec.watch) continue;
    const std::string name = cluster->state.spec.name;
    auto watch = cluster->lock_store->Watch([this, name] { Wake(name, kWatchFollowUp); });
    if (!watch) continue;
    std::lock_guard<std::mutex> lock(mu_);
    cluster->watch = std::move(watch);
    cluster->state.watch = cluster->watch->Status();
  }
}

void Scheduler::Wake(const std::string& cluster_name, std::chrono::milliseconds follow_up_for) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& cluster : clusters_) {
    if (cluster->state.spec.name != cluster_name) continue;
    cluster->follow_up_until =
        std::max(cluster->follow_up_until, SteadyClock::now() + follow_up_for);
    ++cluster->state.wakes;
    loop_.Post([this, c = cluster.get()] { StartFollowUp(*c); });
  }
}

void Scheduler::StartFollowUp(ClusterRuntime& cluster) {
  if (stopping_) return;
  if (cluster.in_round) {
    // The round under way may have read the store before the change: one more right after.
    cluster.again = true;
    cluster.again_follow_up = true;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++cluster.state.follow_up_rounds;
  }
  StartRound(cluster, false, nullptr, true);
}

SteadyClock::time_point Scheduler::NextFollowUp(ClusterRuntime& cluster,
                                                SteadyClock::time_point now) {
  if (cluster.follow_up_until == SteadyClock::time_point{}) return SteadyClock::time_point::max();
  if (now >= cluster.follow_up_until || RoundSettled(cluster.state)) {
    cluster.follow_up_until = SteadyClock::time_point{};
    return SteadyClock::time_point::max();
  }
  return now + kFollowUpInterval;
}

bool Scheduler::RoundSettled(const ClusterSnapshot& state) {
  if (state.split_brain_open) return true;
  const Assessment& a = state.assessment;
  if (a.writable.size() != 1) return false;
  return !state.lock.has_store || a.lock_holder == a.writable.front();
}

void Scheduler::AfterReadings(ClusterRuntime& cluster, std::shared_ptr<RoundWork> work) {
  work->lineage = PreviewLineage(cluster, work->readings, work->times.start_wall);
  work->again = ConfirmationCandidates(cluster.state.spec, work->readings.members, work->lineage);
  if (work->again.size() < 2) {
    FinishRound(cluster, work);
    return;
  }
  work->confirmation.candidate = true;
  Reprobe(cluster, work);
}

void Scheduler::Reprobe(ClusterRuntime& cluster, std::shared_ptr<RoundWork> work) {
  ProbeRound(cluster, work->again, true, [this, &cluster, work](RoundReadings reprobe) {
    if (work->ended) return;
    const bool ok = Guarded("round", [&] { AfterReprobe(cluster, work, std::move(reprobe)); });
    if (!ok) EndRound(cluster, *work);
  });
}

std::string Scheduler::PreviewLineage(ClusterRuntime& cluster, const RoundReadings& readings,
                                      WallClock::time_point at) {
  // Judge the candidate against the lineage the history would give after this round.
  ClusterHistory preview;
  {
    std::lock_guard<std::mutex> lock(mu_);
    preview = cluster.state.history;
  }
  for (const auto& obs : readings.members) {
    RecordObservation(preview.members[obs.member], obs, at);
  }
  return ChooseLineage(cluster.state.spec, preview, readings.dcs ? &*readings.dcs : nullptr);
}

void Scheduler::AfterReprobe(ClusterRuntime& cluster, std::shared_ptr<RoundWork> work,
                             RoundReadings reprobe) {
  const std::vector<std::string> confirmed =
      ConfirmedWritable(reprobe.members, work->lineage, &work->readings.members);
  if (ReprobeAgain(work->retries, confirmed, reprobe.members)) {
    ++work->retries;
    Reprobe(cluster, work);
    return;
  }
  const auto history = [this, &cluster] {
    std::lock_guard<std::mutex> lock(mu_);
    return cluster.state.history;
  };
  work->confirmation = ConfirmRound(work->readings, work->again, std::move(reprobe), confirmed,
                                    history, WallClock::now(), cluster.state.spec.ttl);
  FinishRound(cluster, work);
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
