#include "detector/remediation/remediator.h"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "detector/config/kinds/kinds.h"

namespace sbd {

namespace {

// The DSN's user: the probe's role, whose own sessions the fence keeps.
std::string DsnUser(const std::string& dsn) {
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(
      PQconninfoParse(dsn.c_str(), &error), &PQconninfoFree);
  if (error != nullptr) PQfreemem(error);
  if (!options) return "";
  for (const PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o) {
    if (std::string(o->keyword) == "user" && o->val != nullptr) return o->val;
  }
  return "";
}

std::string DryRunDetail(const std::string& action, const std::string& member,
                         const std::string& holder) {
  if (action == "redis_write_guard") {
    return "would make " + member +
           " refuse writes with its own guard (CONFIG SET "
           "min-replicas-to-write 1000000); Sentinel's master is " +
           holder;
  }
  if (action == "hook") {
    return "would ask the hook to stop " + member + " (the lock store names " + holder + ")";
  }
  if (action == "none") {
    return "would fence " + member + " (the lock store names " + holder +
           "); no action exists for this kind yet";
  }
  return "would make " + member +
         " refuse writes (ALTER SYSTEM SET default_transaction_read_only"
         " = on, reload, end its client sessions); the lock store names " +
         holder;
}

}  // namespace

const std::vector<std::string>& RemediationResults() {
  static const std::vector<std::string> results = {"fenced", "failed", "not_primary", "dry_run",
                                                   "capped"};
  return results;
}

std::string RemediationAction(const std::string& kind) {
  const KindConfig* found = FindKind(kind);
  if (found == nullptr) return "none";
  switch (found->remediation) {
    case RemediationSupport::kPostgresFence:
      return "postgres_read_only";
    case RemediationSupport::kRedisFence:
      return "redis_write_guard";
    case RemediationSupport::kHook:
      return "hook";
    default:
      return "none";
  }
}

Remediator::Remediator(RemediationLimits limits, FenceFn fence, RedisFenceFn redis_fence,
                       HookFenceFn hook_fence)
    : fence_(std::move(fence)),
      redis_fence_(std::move(redis_fence)),
      hook_fence_(std::move(hook_fence)),
      limits_(limits),
      worker_([this] { Run(); }) {}

Remediator::~Remediator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

void Remediator::SetLimits(RemediationLimits limits) {
  std::lock_guard<std::mutex> lock(mu_);
  limits_ = limits;
}

void Remediator::Keep(ClusterRemediation& c, RemediationRecord record) {
  ++c.view.counts[{record.action, record.result}];
  c.view.records.push_back(std::move(record));
  if (c.view.records.size() > kKeptRemediations) c.view.records.erase(c.view.records.begin());
}

bool Remediator::CapHolds(WallClock::time_point now) {
  while (!fences_.empty() && fences_.front() + limits_.window <= now) fences_.pop_front();
  return static_cast<int>(fences_.size()) >= limits_.max_fences;
}

void Remediator::Request(const RemediationRequest& request, WallClock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  ClusterRemediation& c = clusters_[request.cluster];
  if (c.incident != request.incident) {
    c.incident = request.incident;
    c.acted.clear();
    c.dry_runs.clear();
  }
  const std::string action = RemediationAction(request.kind);
  const bool dry_run = request.spec.mode == RemediationMode::kDryRun || action == "none";
  for (const MemberSpec& member : request.targets) {
    if (!(dry_run ? c.dry_runs : c.acted).insert(member.name).second) continue;
    RemediationRecord record{member.name, request.holder,
                             action,      RemediationModeName(request.spec.mode),
                             "",          "",
                             now,         {},
                             0,           false,
                             ""};
    if (dry_run) {
      record.result = "dry_run";
      record.detail = DryRunDetail(action, member.name, request.holder);
      record.finished = now;
      spdlog::warn("cluster={} member={} msg=\"remediation dry run\" detail=\"{}\"",
                   request.cluster, member.name, record.detail);
      Keep(c, std::move(record));
    } else if (CapHolds(now)) {
      record.result = "capped";
      record.detail = "not fenced: the fleet cap of " + std::to_string(limits_.max_fences) +
                      " fences per " + FormatDuration(limits_.window) + " is reached";
      record.finished = now;
      spdlog::error("cluster={} member={} msg=\"remediation capped\" detail=\"{}\"",
                    request.cluster, member.name, record.detail);
      Keep(c, std::move(record));
    } else {
      fences_.push_back(now);
      record.result = "running";
      record.detail = "fencing (the lock store names " + request.holder + ")";
      const std::uint64_t sequence = next_sequence_++;
      c.running.emplace(sequence, std::move(record));
      const auto token = [&](const std::string& name) {
        auto found = request.tokens.find(name);
        return found == request.tokens.end() ? std::string() : found->second;
      };
      HookEvidence evidence{request.cluster,       request.kind,     member.name,
                            token(member.name),    member.claim_url, request.holder,
                            token(request.holder), request.incident, now};
      queue_.push_back(Job{request.cluster, action, request.spec, member, request.redis_tls,
                           sequence, std::move(evidence)});
      spdlog::warn("cluster={} member={} holder={} msg=\"remediation: fencing\"", request.cluster,
                   member.name, request.holder);
    }
  }
  wake_.notify_all();
}

void Remediator::Note(const std::string& cluster, const std::string& kind, RemediationMode mode,
                      const std::string& hold) {
  std::lock_guard<std::mutex> lock(mu_);
  ClusterRemediation& c = clusters_[cluster];
  if (c.view.mode == RemediationMode::kOff && mode != RemediationMode::kOff) {
    for (const std::string& result : RemediationResults()) {
      c.view.counts.emplace(std::make_pair(RemediationAction(kind), result), 0);
    }
  }
  c.view.mode = mode;
  c.view.action = RemediationAction(kind);
  if (hold != c.view.hold && !hold.empty()) {
    spdlog::info("cluster={} msg=\"remediation holds\" reason=\"{}\"", cluster, hold);
  }
  c.view.hold = hold;
}

RemediationView Remediator::View(const std::string& cluster) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto found = clusters_.find(cluster);
  if (found == clusters_.end()) return {};
  RemediationView view = found->second.view;
  for (const auto& [sequence, record] : found->second.running) view.records.push_back(record);
  return view;
}

bool Remediator::Idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !busy_;
}

void Remediator::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    const Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    const FenceOutcome outcome = Act(job);
    lock.lock();
    Finish(job, outcome);
    busy_ = false;
  }
  for (const Job& job : queue_) {
    Finish(job, {"failed", "the detector stopped first", 0, false, ""});
  }
  queue_.clear();
}

// The worker thread, unlocked: the password read (disk: here, never on the loop) and the fence.
FenceOutcome Remediator::Act(const Job& job) {
  if (job.action == "hook") {
    if (!job.spec.hook) return {"failed", "no hook is configured", 0, false, ""};
    auto token = ResolveHookToken(job.spec.hook->token_file, job.spec.hook->token_env);
    if (const std::string* error = std::get_if<std::string>(&token)) {
      return {"failed", "the hook's token: " + *error, 0, false, ""};
    }
    return hook_fence_(
        HookFenceTarget{job.spec.hook->url, std::get<std::optional<std::string>>(token),
                        job.spec.hook->ca_file, HookEvidenceJson(job.evidence), job.spec.timeout});
  }
  MemberSpec login = job.member;
  login.password_file = job.spec.password_file;
  login.password_env = job.spec.password_env;
  login.inline_password.reset();
  auto password = ResolvePassword(login);
  if (const std::string* error = std::get_if<std::string>(&password)) {
    return {"failed", "the fencing role's password: " + *error, 0, false, ""};
  }
  std::optional<std::string> secret = std::get<std::optional<std::string>>(password);
  if (job.action == "redis_write_guard") {
    return redis_fence_(RedisFenceTarget{job.member.address, job.spec.user, std::move(secret),
                                         job.redis_tls, job.spec.timeout});
  }
  return fence_(FenceTarget{job.member.dsn, job.spec.user, std::move(secret),
                            DsnUser(job.member.dsn), job.spec.timeout});
}

void Remediator::Finish(const Job& job, const FenceOutcome& outcome) {
  ClusterRemediation& c = clusters_[job.cluster];
  auto running = c.running.find(job.sequence);
  if (running == c.running.end()) return;
  RemediationRecord record = std::move(running->second);
  c.running.erase(running);
  record.result = outcome.result;
  record.detail = outcome.detail;
  record.sessions_ended = outcome.sessions_ended;
  record.verified = outcome.verified;
  record.undo = outcome.undo;
  record.finished = WallClock::now();
  spdlog::log(outcome.result == "fenced" ? spdlog::level::warn : spdlog::level::err,
              "cluster={} member={} result={} msg=\"remediation done\" detail=\"{}\"", job.cluster,
              record.member, record.result, record.detail);
  Keep(c, std::move(record));
}

}  // namespace sbd
