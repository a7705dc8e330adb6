#include "detector/engine/scheduler.h"

#include <algorithm>
#include <future>

#include "detector/common/internal_errors.h"
#include "detector/engine/fold.h"
#include "detector/engine/scheduler_state.h"
#include "probes/async_probe.h"

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
      const auto step = std::min<SteadyClock::duration>(
          std::chrono::milliseconds(2), cluster.state.timing().probe_interval / count);
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
          (work.on_timer ? cluster.next : work.times.start) + cluster.state.timing().probe_interval;
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

}  // namespace sbd
