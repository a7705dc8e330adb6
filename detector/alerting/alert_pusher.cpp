#include "detector/alerting/alert_pusher.h"

#include <spdlog/spdlog.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "detector/common/alertmanager_url.h"
#include "detector/common/internal_errors.h"
#include "detector/common/json_text.h"
#include "probes/event_loop.h"
#include "probes/http_loop.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;

constexpr std::chrono::seconds kDropLogInterval{10};

// One Alertmanager: its parts (see alertmanager_url.h) and where alerts are posted.
struct Endpoint : AlertmanagerEndpoint {
  std::string path;  // "/prefix/api/v2/alerts"
};

Endpoint ParseUrl(const std::string& url) {
  Endpoint ep;
  static_cast<AlertmanagerEndpoint&>(ep) = SplitAlertmanagerUrl(url);
  // Misuse at start-up throws (the config validated the URLs already).
  if (!ep.error.empty()) throw std::invalid_argument(ep.error);
  ep.path = ep.base_path + "/api/v2/alerts";
  return ep;
}

bool ValidLabelName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (!(std::isalpha(c) || c == '_' || (i > 0 && std::isdigit(c)))) return false;
  }
  return true;
}

// A failed POST in the words of last_error: the bound it broke, never the credentials
// (LoopHttpClient's messages name the request and the bound only).
std::string Describe(const ProbeFailure& failure) {
  switch (failure.reason) {
    case ProbeFailureReason::kRefused:
    case ProbeFailureReason::kUnreachable:
      return "cannot connect (refused or unreachable): " + failure.message;
    case ProbeFailureReason::kAuth:
      return "TLS server certificate verification failed: " + failure.message;
    default:
      return failure.message;
  }
}

// Most bytes of an Alertmanager's answer kept (its error text; a success is a short JSON).
constexpr size_t kMaxAnswerBytes = 64 * 1024;

// The first line of an error response, bounded, for last_error.
std::string Excerpt(const std::string& body) {
  std::string line = body.substr(0, body.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return line;
}

double UnixSeconds(SystemClock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

nlohmann::json AlertJson(const Alert& alert, SystemClock::time_point starts_at,
                         SystemClock::time_point ends_at) {
  nlohmann::json j;
  j["labels"] = alert.labels;
  j["annotations"] = alert.annotations;
  j["startsAt"] = FormatRfc3339Millis(starts_at);
  // Alertmanager rejects endsAt before startsAt (e.g. after the clock stepped back).
  j["endsAt"] = FormatRfc3339Millis(std::max(ends_at, starts_at));
  if (!alert.generator_url.empty()) j["generatorURL"] = alert.generator_url;
  return j;
}

}  // namespace

std::string FormatRfc3339Millis(SystemClock::time_point t) {
  const auto ms = std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
  time_t seconds = static_cast<time_t>(ms / 1000);
  int millis = static_cast<int>(ms % 1000);
  if (millis < 0) {
    millis += 1000;
    seconds -= 1;
  }
  tm utc{};
  gmtime_r(&seconds, &utc);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", millis);
  return buf;
}

// One Alertmanager: a queue holding the newest state of each alert and a thread that POSTs it.
class AlertPusher::Worker {
 public:
  Worker(Endpoint endpoint, const AlertPusherOptions& options, EventLoop& loop)
      : endpoint_(std::move(endpoint)),
        timeout_(std::max(milliseconds(1), options.timeout)),
        max_attempts_(std::max(1, options.max_attempts)),
        retry_backoff_(options.retry_backoff),
        max_queued_(std::max<std::size_t>(1, options.max_queued_alerts)),
        loop_(loop) {
    stats_.url = endpoint_.redacted;
    request_.url = endpoint_.scheme_host_port + endpoint_.path;
    request_.headers = {"User-Agent: splitbrain-detector"};
    request_.bounds.max_body_bytes = kMaxAnswerBytes;
    request_.credentials.ca_file = options.ca_file;
    if (endpoint_.has_auth) {
      request_.credentials.basic_user = endpoint_.user;
      request_.credentials.basic_password = endpoint_.password;
    }
    thread_ = std::thread([this] { Run(); });
  }

  ~Worker() { Stop(); }

  // Queues the newest state of each alert; an older queued state of the same alert is replaced.
  void Enqueue(const std::vector<std::pair<LabelSet, nlohmann::json>>& alerts) {
    std::string warning;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      for (const auto& [labels, body] : alerts) pending_[labels] = Queued{body, ++seq_};
      warning = DropWarning(Cap(pending_));
    }
    cv_.notify_all();
    if (!warning.empty()) spdlog::warn(warning);
  }

  // True once the queue is empty and no push is in flight, false if `deadline` came first.
  bool WaitIdle(SteadyClock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return idle_cv_.wait_until(lock, deadline,
                               [&] { return exited_ || (pending_.empty() && !busy_); });
  }

  AlertmanagerStats Stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      // A POST in flight is given up at once (its client is dropped on the loop).
      if (call_ != nullptr) call_->Cancel();
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Queued {
    nlohmann::json body;
    uint64_t seq;  // enqueue order, to drop the oldest when over the cap
  };
  using Batch = std::map<LabelSet, Queued>;

  // Drops the oldest entries beyond max_queued_. Caller holds mu_.
  std::size_t Cap(Batch& batch) {
    if (batch.size() <= max_queued_) return 0;
    std::vector<uint64_t> seqs;
    seqs.reserve(batch.size());
    for (const auto& entry : batch) seqs.push_back(entry.second.seq);
    const std::size_t excess = batch.size() - max_queued_;
    std::nth_element(seqs.begin(), seqs.begin() + static_cast<long>(excess - 1), seqs.end());
    const uint64_t cutoff = seqs[excess - 1];  // seqs are unique: drop exactly those <= cutoff
    for (auto it = batch.begin(); it != batch.end();) {
      it = it->second.seq <= cutoff ? batch.erase(it) : std::next(it);
    }
    stats_.dropped += excess;
    return excess;
  }

  // The warning to log for `n` newly dropped states, at most one per kDropLogInterval (a dead
  // Alertmanager would otherwise log at every Update). Caller holds mu_.
  std::string DropWarning(std::size_t n) {
    unlogged_drops_ += n;
    const auto now = SteadyClock::now();
    if (unlogged_drops_ == 0 || (drop_logged_ && now - last_drop_log_ < kDropLogInterval)) {
      return "";
    }
    std::string warning = fmt::format(
        "msg=\"alertmanager queue full, dropped oldest alert states\" alertmanager={} dropped={} "
        "max_queued_alerts={}",
        endpoint_.redacted, unlogged_drops_, max_queued_);
    unlogged_drops_ = 0;
    drop_logged_ = true;
    last_drop_log_ = now;
    return warning;
  }

  static std::string Serialize(const Batch& batch) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& entry : batch) array.push_back(entry.second.body);
    return JsonText(array);
  }

  // One POST on the pusher's loop, bounded as a whole by timeout_ (connect, TLS, send, status,
  // headers and body together) and by the caps on each part of the answer.
  bool PostOnce(const std::string& body, std::string* error) {
    HttpRequest request = request_;
    request.post_body = body;
    HttpResult result;
    {
      BlockingHttpCall call(loop_, std::move(request), SteadyClock::now() + timeout_);
      // Stop() may cancel it until it is gone, however this block ends.
      struct InFlight {
        Worker& worker;
        ~InFlight() {
          std::lock_guard<std::mutex> lock(worker.mu_);
          worker.call_ = nullptr;
        }
      } in_flight{*this};
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) call.Cancel();
        call_ = &call;
      }
      result = call.Wait();
    }
    if (const auto* failure = std::get_if<ProbeFailure>(&result)) {
      *error = Describe(*failure);
      return false;
    }
    const HttpAnswer& answer = std::get<HttpAnswer>(result);
    if (answer.status != 200) {
      *error = "HTTP " + std::to_string(answer.status);
      const std::string excerpt = Excerpt(answer.body);
      if (!excerpt.empty()) *error += ": " + excerpt;
      return false;
    }
    return true;
  }

  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (stopping_) break;
      Batch batch = std::move(pending_);
      pending_.clear();
      busy_ = true;
      int attempts = 0;
      bool ok = false;
      std::string error;
      auto backoff = retry_backoff_;
      for (;;) {
        ++attempts;
        lock.unlock();  // `batch` is ours alone
        // A push that throws (it must not) counts as a failed attempt, never kills the sender.
        ok = false;
        if (!Guarded("alert push", [&] { ok = PostOnce(Serialize(batch), &error); })) {
          error = "internal error (counted in splitbrain_internal_errors_total)";
        }
        lock.lock();
        if (ok || stopping_ || attempts >= max_attempts_) break;
        lock.unlock();
        spdlog::debug(
            "msg=\"alertmanager push attempt failed, retrying\" alertmanager={} attempt={} "
            "backoff_ms={} error=\"{}\"",
            endpoint_.redacted, attempts, backoff.count(), error);
        lock.lock();
        if (cv_.wait_for(lock, backoff, [&] { return stopping_; })) break;
        backoff *= 2;
        // Coalesce: what was queued meanwhile is newer than what we hold.
        for (auto& entry : pending_) batch[entry.first] = std::move(entry.second);
        pending_.clear();
        if (const std::string warning = DropWarning(Cap(batch)); !warning.empty()) {
          lock.unlock();
          spdlog::warn(warning);
          lock.lock();
        }
      }
      const double now = UnixSeconds(SystemClock::now());
      const bool aborted = !ok && stopping_;
      const bool recovered = ok && stats_.last_failure_unix > stats_.last_success_unix;
      const std::size_t queued = pending_.size();
      if (!aborted) ++stats_.pushes;
      if (ok) {
        stats_.alerts_sent += batch.size();
        stats_.last_success_unix = now;
      } else if (!aborted) {
        ++stats_.failures;
        stats_.last_failure_unix = now;
        stats_.last_error = error;
      }
      lock.unlock();
      if (aborted) {
        spdlog::warn(
            "msg=\"alertmanager push dropped at shutdown\" alertmanager={} alerts={} queued={}",
            endpoint_.redacted, batch.size(), queued);
      } else if (!ok) {
        spdlog::warn(
            "msg=\"alertmanager push failed\" alertmanager={} alerts={} attempts={} error=\"{}\"",
            endpoint_.redacted, batch.size(), attempts, error);
      } else if (recovered) {
        spdlog::info("msg=\"alertmanager push succeeded again\" alertmanager={} alerts={}",
                     endpoint_.redacted, batch.size());
      }
      lock.lock();
      busy_ = false;
      idle_cv_.notify_all();
    }
    exited_ = true;
    idle_cv_.notify_all();
  }

  const Endpoint endpoint_;
  const milliseconds timeout_;
  const int max_attempts_;
  const milliseconds retry_backoff_;
  const std::size_t max_queued_;
  EventLoop& loop_;
  HttpRequest request_;  // the POST without its body

  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the worker: work queued, or stopping
  std::condition_variable idle_cv_;  // wakes WaitIdle and Stop
  Batch pending_;
  uint64_t seq_ = 0;
  bool busy_ = false;
  bool stopping_ = false;
  bool exited_ = false;
  BlockingHttpCall* call_ = nullptr;  // the POST in flight, for Stop() to cancel
  AlertmanagerStats stats_;
  uint64_t unlogged_drops_ = 0;
  bool drop_logged_ = false;
  SteadyClock::time_point last_drop_log_{};
  std::thread thread_;
};

AlertPusher::AlertPusher(AlertPusherOptions options)
    : options_(std::move(options)), loop_(std::make_unique<EventLoop>()) {
  std::vector<Endpoint> endpoints;
  for (const auto& url : options_.alertmanager_urls) endpoints.push_back(ParseUrl(url));
  for (auto& endpoint : endpoints) {
    workers_.push_back(std::make_unique<Worker>(std::move(endpoint), options_, *loop_));
  }
}

AlertPusher::~AlertPusher() {
  // Each Stop() cancels its POST in flight and joins its thread; the loop goes last.
  for (auto& worker : workers_) worker->Stop();
  workers_.clear();
}

void AlertPusher::Update(const std::string& group, std::vector<Alert> firing) {
  const auto now = SteadyClock::now();
  const auto wall = SystemClock::now();
  const auto lease = 4 * options_.resend_interval;

  std::map<LabelSet, Alert> incoming;
  for (auto& alert : firing) {
    bool valid = !alert.labels.empty();
    for (const auto& label : alert.labels) valid = valid && ValidLabelName(label.first);
    if (!valid) {
      spdlog::error("msg=\"alert skipped: no labels or an invalid label name\" group={} labels={}",
                    group, JsonText(nlohmann::json(alert.labels)));
      continue;
    }
    for (auto it = alert.annotations.begin(); it != alert.annotations.end();) {
      if (ValidLabelName(it->first)) {
        ++it;
        continue;
      }
      spdlog::warn("msg=\"alert annotation dropped: invalid name\" group={} annotation=\"{}\"",
                   group, it->first);
      it = alert.annotations.erase(it);
    }
    LabelSet key = alert.labels;
    incoming[std::move(key)] = std::move(alert);
  }

  std::vector<std::pair<LabelSet, nlohmann::json>> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto& tracked = groups_[group];
  for (auto it = tracked.begin(); it != tracked.end();) {
    if (incoming.count(it->first) != 0) {
      ++it;
      continue;
    }
    out.emplace_back(it->first, AlertJson(it->second.alert, it->second.starts_at, wall));
    it = tracked.erase(it);
  }
  for (auto& [labels, alert] : incoming) {
    auto it = tracked.find(labels);
    if (it == tracked.end()) {
      out.emplace_back(labels, AlertJson(alert, wall, wall + lease));
      tracked.emplace(labels, Tracked{std::move(alert), wall, now});
      continue;
    }
    Tracked& t = it->second;
    const bool changed =
        t.alert.annotations != alert.annotations || t.alert.generator_url != alert.generator_url;
    if (!changed && now - t.last_sent < options_.resend_interval) continue;
    t.alert = std::move(alert);
    t.last_sent = now;
    out.emplace_back(labels, AlertJson(t.alert, t.starts_at, wall + lease));
  }
  if (tracked.empty()) groups_.erase(group);
  // Still under mu_, so that concurrent Updates queue their states in the order they computed
  // them. Enqueue only takes the worker's queue lock, never waits on the network.
  if (!out.empty()) {
    for (auto& worker : workers_) worker->Enqueue(out);
  }
}

bool AlertPusher::ResolveAll(std::chrono::milliseconds wait) {
  const auto deadline = SteadyClock::now() + wait;
  const auto wall = SystemClock::now();
  {
    std::vector<std::pair<LabelSet, nlohmann::json>> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& group : groups_) {
      for (const auto& [labels, t] : group.second) {
        out.emplace_back(labels, AlertJson(t.alert, t.starts_at, wall));
      }
    }
    groups_.clear();
    if (!out.empty()) {
      for (auto& worker : workers_) worker->Enqueue(out);
    }
  }
  bool idle = true;
  for (auto& worker : workers_) idle = worker->WaitIdle(deadline) && idle;
  return idle;
}

std::vector<AlertmanagerStats> AlertPusher::Stats() const {
  std::vector<AlertmanagerStats> stats;
  for (const auto& worker : workers_) stats.push_back(worker->Stats());
  return stats;
}

std::vector<std::pair<Alert, std::chrono::system_clock::time_point>> AlertPusher::Firing() const {
  std::vector<std::pair<Alert, std::chrono::system_clock::time_point>> firing;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& group : groups_) {
    for (const auto& entry : group.second) {
      firing.emplace_back(entry.second.alert, entry.second.starts_at);
    }
  }
  return firing;
}

}  // namespace sbd
