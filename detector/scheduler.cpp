#include "detector/scheduler.h"

#include <spdlog/spdlog.h>

#include <future>

#include "probes/postgres.h"

namespace sbd {

namespace {

// How long past its deadline the scheduler waits for a probe thread to hand back its result.
constexpr auto kCollectGrace = std::chrono::milliseconds(50);

Observation TimedOut(const std::string& member, const ReadingWindow& window,
                     const std::string& why) {
  Observation obs;
  obs.member = member;
  obs.window = window;
  obs.window.received = SteadyClock::now();
  obs.result = ProbeFailure{ProbeFailureReason::kTimeout, why};
  return obs;
}

}  // namespace

ProbeFactory PostgresProbeFactory() {
  return [](const ClusterSpec& cluster, const MemberSpec& member) {
    return std::make_unique<PostgresProbe>(member, cluster.probe_timeout);
  };
}

ProbeExecutor::ProbeExecutor(size_t threads) {
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

ProbeExecutor::~ProbeExecutor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ProbeExecutor::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ProbeExecutor::Work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

/// One member's probe and whether a probe of it is still running.
struct Scheduler::MemberSlot {
  std::unique_ptr<MemberProbe> probe;
  std::atomic<bool> busy{false};
};

struct Scheduler::ClusterRuntime {
  std::vector<std::unique_ptr<MemberSlot>> members;
  ClusterSnapshot state;  // guarded by Scheduler::mu_
};

Scheduler::Scheduler(const ValidatedConfig& config, ProbeFactory factory) {
  size_t total_members = 0;
  for (const auto& spec : config.clusters()) {
    auto cluster = std::make_unique<ClusterRuntime>();
    cluster->state.spec = spec;
    for (const auto& member : spec.members) {
      auto slot = std::make_unique<MemberSlot>();
      slot->probe = factory(spec, member);
      cluster->members.push_back(std::move(slot));
      cluster->state.counters[member.name] = MemberCounters{};
    }
    total_members += spec.members.size();
    clusters_.push_back(std::move(cluster));
  }
  // A member holds a thread at most until its deadline (or libpq's connect_timeout), and a
  // busy member is never probed twice, so one thread per member can never starve anyone.
  executor_ = std::make_unique<ProbeExecutor>(std::max<size_t>(2, total_members));
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Inherit(const std::vector<ClusterSnapshot>& previous) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& cluster : clusters_) {
    for (const auto& old : previous) {
      if (old.spec.name != cluster->state.spec.name) continue;
      cluster->state.history.lineage = old.history.lineage;
      for (const auto& member : cluster->state.spec.members) {
        auto it = old.history.members.find(member.name);
        if (it != old.history.members.end()) {
          cluster->state.history.members[member.name] = it->second;
        }
      }
    }
  }
}

void Scheduler::SetRoundListener(RoundListener listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listener_ = std::move(listener);
}

void Scheduler::Start() {
  for (auto& cluster : clusters_) {
    threads_.emplace_back([this, c = cluster.get()] { ClusterLoop(*c); });
  }
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void Scheduler::RunOnce() {
  std::vector<std::thread> rounds;
  for (auto& cluster : clusters_) {
    rounds.emplace_back([this, c = cluster.get()] { RunRound(*c); });
  }
  for (auto& t : rounds) t.join();
}

std::vector<ClusterSnapshot> Scheduler::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ClusterSnapshot> out;
  for (const auto& cluster : clusters_) out.push_back(cluster->state);
  return out;
}

bool Scheduler::AllClustersHaveRun() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& cluster : clusters_) {
    if (!cluster->state.has_round) return false;
  }
  return true;
}

void Scheduler::ClusterLoop(ClusterRuntime& cluster) {
  const auto interval = cluster.state.spec.probe_interval;
  auto next = SteadyClock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    RunRound(cluster);
    lock.lock();
    next += interval;
    auto now = SteadyClock::now();
    if (next < now) {
      // The round ran past the next slot: start at once rather than firing a burst.
      ++cluster.state.overruns;
      next = now;
    }
    stop_cv_.wait_until(lock, next, [this] { return stopping_; });
  }
}

std::vector<Observation> Scheduler::ProbeMembers(ClusterRuntime& cluster,
                                                 const std::vector<size_t>& member_indexes,
                                                 bool gated) {
  const ClusterSpec& spec = cluster.state.spec;
  const auto deadline = SteadyClock::now() + spec.probe_timeout;
  struct Pending {
    size_t index;
    ReadingWindow started;
    std::future<Observation> result;
  };
  std::vector<Pending> pending;
  std::vector<Observation> out(member_indexes.size());
  auto gate =
      gated ? std::make_shared<StartGate>(static_cast<int>(member_indexes.size())) : nullptr;
  for (size_t i = 0; i < member_indexes.size(); ++i) {
    const size_t index = member_indexes[i];
    MemberSlot& slot = *cluster.members[index];
    ReadingWindow started{WallClock::now(), SteadyClock::now(), SteadyClock::now()};
    if (slot.busy.exchange(true)) {
      // The previous probe is still blocked (e.g. in libpq's connect_timeout): that is
      // this member's answer again, and the round does not wait for it.
      out[i] = TimedOut(spec.members[index].name, started, "previous probe still running");
      if (gate) gate->Arrive();
      continue;
    }
    auto promise = std::make_shared<std::promise<Observation>>();
    pending.push_back(Pending{i, started, promise->get_future()});
    executor_->Submit([&slot, promise, deadline, gate] {
      Observation obs = slot.probe->Probe(deadline, gate.get());
      slot.busy.store(false);
      promise->set_value(std::move(obs));
    });
  }
  for (auto& p : pending) {
    const std::string& name = spec.members[member_indexes[p.index]].name;
    if (p.result.wait_until(deadline + kCollectGrace) == std::future_status::ready) {
      out[p.index] = p.result.get();
    } else {
      out[p.index] = TimedOut(name, p.started, "no answer before the deadline");
    }
  }
  return out;
}

void Scheduler::RunRound(ClusterRuntime& cluster) {
  const ClusterSpec& spec = cluster.state.spec;
  const auto round_start_wall = WallClock::now();
  const auto round_start = SteadyClock::now();
  std::vector<size_t> everyone(spec.members.size());
  for (size_t i = 0; i < everyone.size(); ++i) everyone[i] = i;
  std::vector<Observation> round = ProbeMembers(cluster, everyone, false);

  // Judge the candidate against the lineage the history would give after this round.
  ClusterHistory preview;
  {
    std::lock_guard<std::mutex> lock(mu_);
    preview = cluster.state.history;
  }
  for (const auto& obs : round)
    RecordObservation(preview.members[obs.member], obs, round_start_wall);
  const std::string lineage = ChooseLineage(spec, preview);

  bool candidate = false;
  bool confirmed = false;
  std::vector<std::string> writable = WritableInLineage(round, lineage);
  if (writable.size() >= 2) {
    candidate = true;
    std::vector<size_t> again;
    for (size_t i = 0; i < spec.members.size(); ++i) {
      if (std::find(writable.begin(), writable.end(), spec.members[i].name) != writable.end()) {
        again.push_back(i);
      }
    }
    std::vector<Observation> reprobe = ProbeMembers(cluster, again, true);
    confirmed = !ConfirmedWritable(reprobe, lineage).empty();
    // The re-probe is the fresher reading: it replaces the first one.
    for (size_t i = 0; i < again.size(); ++i) round[again[i]] = std::move(reprobe[i]);
  }
  const auto round_end_wall = WallClock::now();

  RoundListener listener;
  ClusterSnapshot snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ClusterSnapshot& state = cluster.state;
    for (const auto& obs : round) {
      RecordObservation(state.history.members[obs.member], obs, round_end_wall);
      MemberCounters& counters = state.counters[obs.member];
      ++counters.probes;
      counters.last_duration_seconds = obs.window.Seconds();
      if (const ProbeFailure* failure = obs.failure()) {
        ++counters.failures_by_reason[ReasonName(failure->reason)];
      }
    }
    state.history.lineage = ChooseLineage(spec, state.history);
    Assessment assessment = Assess(spec, round, state.history, confirmed);
    if (candidate) ++(confirmed ? state.confirmations_accepted : state.confirmations_rejected);
    if (!state.has_round || assessment.verdict != state.assessment.verdict) {
      state.verdict_since = round_end_wall;
      spdlog::log(
          assessment.verdict == Verdict::kHealthy ? spdlog::level::info : spdlog::level::warn,
          "cluster={} verdict={} lineage={} summary=\"{}\"", spec.name,
          VerdictName(assessment.verdict), assessment.lineage, assessment.summary);
    }
    state.assessment = std::move(assessment);
    state.last_round = std::move(round);
    state.has_round = true;
    ++state.rounds;
    state.last_round_start = round_start_wall;
    state.last_round_end = round_end_wall;
    state.last_round_seconds =
        std::chrono::duration<double>(SteadyClock::now() - round_start).count();
    listener = listener_;
    if (listener) snapshot = state;
  }
  if (listener) listener(snapshot);
}

}  // namespace sbd
