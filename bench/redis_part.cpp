#include "bench/redis_part.h"

#include <signal.h>

#include <cctype>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "bench/bench_util.h"
#include "bench/redis_group.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace sbd::bench {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr const char* kMasterName = "bench";
constexpr const char* kDetectorAlert = "SplitBrain";

double Secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

testing::BackgroundOptions DieWithParent() {
  testing::BackgroundOptions options;
  options.die_with_parent = true;
  return options;
}

/// Waits for `ready` on a child just started; throws with `state` (what was last seen, if
/// given) and its log tail when it does not come.
void AwaitStart(pid_t pid, const std::string& what, const std::string& log,
                const std::function<bool()>& ready, seconds deadline,
                const std::string* state = nullptr) {
  std::string how;
  if (testing::WaitUntilReady(pid, ready, deadline, milliseconds(300), &how) !=
      testing::StartupOutcome::kReady) {
    throw std::runtime_error(what + " not ready (" + (how.empty() ? "timed out" : how) +
                             (state ? "; " + *state : "") + "):\n" + testing::Tail(log, 20));
  }
}

/// Debian's prometheus-redis-exporter (1.45) for one member.
class RedisExporter {
 public:
  RedisExporter(const std::string& dir, const RedisGroup::Process& member) {
    const std::string binary = testing::FindExecutable("prometheus-redis-exporter");
    if (binary.empty()) throw std::runtime_error("prometheus-redis-exporter not installed");
    port_ = testing::FreeLoopbackPort();
    const std::string log = dir + "/exporter-" + member.name + ".log";
    pid_ = testing::SpawnBackgroundProcess(
        {binary, "-redis.addr=redis://127.0.0.1:" + std::to_string(member.port),
         "-web.listen-address=127.0.0.1:" + std::to_string(port_)},
        log, DieWithParent());
    AwaitStart(
        pid_, "redis_exporter " + member.name, log,
        [&] {
          return HttpGetTimed(port_, "/metrics", seconds(5)).body.find("redis_instance_info{") !=
                 std::string::npos;
        },
        seconds(30));
  }
  ~RedisExporter() { testing::StopChildProcess(pid_, SIGTERM, seconds(5)); }
  RedisExporter(const RedisExporter&) = delete;
  RedisExporter& operator=(const RedisExporter&) = delete;
  int port() const { return port_; }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
};

/// Prometheus 2.42 scraping one exporter per member in one job (labels env, member) at 15 s
/// scrape and evaluation intervals, with the rule people use today, `for: 0m`.
class RedisRuleStack {
 public:
  RedisRuleStack(const std::string& dir, const RedisGroup& group, const std::string& am_url) {
    testing::MakeDir(dir, 0755);
    for (const auto& m : group.members()) {
      exporters_.push_back(std::make_unique<RedisExporter>(dir, m));
    }
    const std::string rules = testing::WriteFile(dir, "rules.yml", std::string(R"(groups:
  - name: redis
    rules:
      - alert: )") + kRedisRuleAlert + R"(
        expr: count(redis_instance_info{role="master"}) > 1
        for: 0m
        labels: {severity: critical}
)");
    std::string config =
        "global:\n  scrape_interval: 15s\n  evaluation_interval: 15s\nrule_files: [" + rules +
        "]\nalerting:\n  alertmanagers:\n    - api_version: v2\n      static_configs:\n"
        "        - targets: ['" +
        am_url.substr(am_url.find("//") + 2) +
        "']\nscrape_configs:\n  - job_name: redis\n    static_configs:\n";
    for (size_t i = 0; i < exporters_.size(); ++i) {
      config += "      - targets: ['127.0.0.1:" + std::to_string(exporters_[i]->port()) +
                "']\n        labels: {env: bench, member: " + group.members()[i].name + "}\n";
    }
    const std::string config_file = testing::WriteFile(dir, "prometheus.yml", config);
    const std::string binary = testing::FindExecutable("prometheus");
    if (binary.empty()) throw std::runtime_error("prometheus not installed");
    port_ = testing::FreeLoopbackPort();
    const std::string log = dir + "/prometheus.log";
    pid_ = testing::SpawnBackgroundProcess(
        {binary, "--config.file=" + config_file, "--storage.tsdb.path=" + dir + "/data",
         "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
        log, DieWithParent());
    // Ready, the Alertmanager discovered (alerts fired before that are dropped) and every
    // exporter scraped once.
    std::string state = "not ready";
    AwaitStart(
        pid_, "prometheus", log,
        [&] {
          if (HttpGetTimed(port_, "/-/ready", seconds(2)).status != 200) return false;
          const auto self = HttpGetTimed(port_, "/metrics", seconds(5)).body;
          const double ams =
              testing::MetricValue(self, "prometheus_notifications_alertmanagers_discovered");
          const double up = Query("sum(up{job=\"redis\"})");
          state = "alertmanagers discovered " + Fixed(ams, 0) + ", targets up " + Fixed(up, 0);
          return ams >= 1 && up == static_cast<double>(exporters_.size());
        },
        seconds(90), &state);
  }
  ~RedisRuleStack() { testing::StopChildProcess(pid_, SIGTERM, seconds(10)); }
  RedisRuleStack(const RedisRuleStack&) = delete;
  RedisRuleStack& operator=(const RedisRuleStack&) = delete;

  /// The first value of an instant query; -1 when there is none or Prometheus cannot answer.
  double Query(const std::string& promql) const {
    std::string escaped;
    for (unsigned char c : promql) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      escaped += std::isalnum(c) ? std::string(1, static_cast<char>(c)) : std::string(buf);
    }
    const auto r = HttpGetTimed(port_, "/api/v1/query?query=" + escaped, seconds(5));
    if (r.status != 200) return -1;
    try {
      const json reply = json::parse(r.body);
      const json& result = reply["data"]["result"];
      return result.empty() ? -1 : std::stod(result[0]["value"][1].get<std::string>());
    } catch (const std::exception&) {
      return -1;
    }
  }

  /// Pending or firing alerts of the rule; -1 when Prometheus cannot be asked.
  int ActiveAlerts() const {
    const auto r = HttpGetTimed(port_, "/api/v1/alerts", seconds(5));
    if (r.status != 200) return -1;
    try {
      int n = 0;
      const json reply = json::parse(r.body);  // kept: the loop reads into it
      for (const auto& a : reply["data"]["alerts"]) {
        if (a.value("labels", json::object()).value("alertname", "") == kRedisRuleAlert) ++n;
      }
      return n;
    } catch (const std::exception&) {
      return -1;
    }
  }

 private:
  std::vector<std::unique_ptr<RedisExporter>> exporters_;
  int port_ = 0;
  pid_t pid_ = -1;
};

std::string DetectorConfig(const RedisGroup& group, const std::string& am_url, int ttl_ms) {
  std::string yaml = "alerting:\n  alertmanagers:\n    - url: " + am_url +
                     "\n  resend_interval: 5s\nclusters:\n  - name: bench-redis\n"
                     "    kind: redis\n    ttl: " +
                     std::to_string(ttl_ms) +
                     "ms\n    probe_interval: 1s\n    probe_timeout: 800ms\n    members:\n";
  for (const auto& m : group.members()) {
    yaml +=
        "      - name: " + m.name + "\n        address: 127.0.0.1:" + std::to_string(m.port) + "\n";
  }
  yaml += "    redis:\n      master_name: " + group.master_name() + "\n      sentinels: [";
  for (size_t i = 0; i < group.sentinels().size(); ++i) {
    yaml += (i ? ", " : "") + std::string("127.0.0.1:") + std::to_string(group.sentinels()[i].port);
  }
  return yaml + "]\n";
}

/// The first delivery after `since` carrying a firing alert named `alertname`, with that
/// alert; nullopt when none came.
std::optional<std::pair<testing::WebhookReceiver::Delivery, json>> FirstFiring(
    const testing::WebhookReceiver& webhook, const std::string& alertname,
    Clock::time_point since) {
  for (const auto& d : webhook.Deliveries()) {
    if (d.at < since || !d.body.is_object() || !d.body.contains("alerts")) continue;
    for (const auto& a : d.body["alerts"]) {
      if (a.value("labels", json::object()).value("alertname", "") == alertname &&
          a.value("status", "") == "firing") {
        return std::make_pair(d, a);
      }
    }
  }
  return std::nullopt;
}

int ActiveAmAlerts(const testing::AlertmanagerServer& am) {
  try {
    int n = 0;
    for (const auto& a : am.Alerts()) {
      const std::string name = a.value("labels", json::object()).value("alertname", "");
      if (name == kDetectorAlert || name == kRedisRuleAlert) ++n;
    }
    return n;
  } catch (const std::exception&) {
    return -1;
  }
}

/// Everything the trials share.
struct Stack {
  testing::TempDir root{"sbd-bench-redis-"};
  std::unique_ptr<RedisGroup> group;
  std::unique_ptr<testing::WebhookReceiver> webhook;
  std::unique_ptr<testing::AlertmanagerServer> am;
  std::unique_ptr<RedisRuleStack> rules;
  std::unique_ptr<testing::DetectorProcess> detector;
  int detector_port = 0;

  std::string Verdict() const {
    const std::string body = testing::HttpGet(detector_port, "/status");
    try {
      return body.empty() ? "" : json::parse(body)["clusters"][0].value("verdict", "");
    } catch (const std::exception&) {
      return "";
    }
  }
};

void StartStack(Stack& s, const RedisPartOptions& o) {
  Log("redis: starting a master, two replicas and three sentinels (down-after " +
      std::to_string(o.down_after_ms) + " ms)");
  s.group = std::make_unique<RedisGroup>(kMasterName, 2, milliseconds(o.down_after_ms));
  s.webhook = std::make_unique<testing::WebhookReceiver>();
  s.am = std::make_unique<testing::AlertmanagerServer>(s.root.path() + "/am", s.webhook->url());
  Log("redis: starting one redis_exporter per member and Prometheus (15 s scrape/eval)");
  s.rules = std::make_unique<RedisRuleStack>(s.root.path() + "/rulestack", *s.group, s.am->url());
  const std::string config = testing::WriteFile(
      s.root.path(), "detector.yml", DetectorConfig(*s.group, s.am->url(), o.down_after_ms));
  const std::string log = s.root.path() + "/detector.log";
  s.detector_port = testing::FreeLoopbackPort();
  s.detector = std::make_unique<testing::DetectorProcess>(
      o.detector,
      std::vector<std::string>{"--config.file=" + config,
                               "--web.listen-address=127.0.0.1:" + std::to_string(s.detector_port),
                               "--log.level=warn"},
      log);
  if (!testing::WaitFor([&] { return testing::HttpGet(s.detector_port, "/-/ready") == "Ready\n"; },
                        seconds(30), milliseconds(100))) {
    throw std::runtime_error("detector not ready:\n" + testing::Tail(log, 30));
  }
}

/// One trial: promote `victim` by hand, time both systems from the writer's onset, heal.
json Trial(Stack& s, int t, const std::string& master, const std::string& victim) {
  const auto& group = *s.group;
  const RedisGroup::Process& v = group.Member(victim);
  std::vector<int> ports;
  for (const auto& m : group.members()) ports.push_back(m.port);
  DualWriter writer(ports);
  const std::string load = LoadAvg();
  const auto promote = Clock::now();
  const auto promoted = RedisCall(v.port, {"REPLICAOF", "NO", "ONE"});
  if (!promoted.ok)
    throw std::runtime_error("REPLICAOF NO ONE on " + victim + ": " + promoted.error);
  Log("redis: trial " + std::to_string(t) + ": promoted " + victim + " by hand; " + master +
      " keeps its place in Sentinel");
  if (!testing::WaitFor([&] { return writer.FirstBoth().has_value(); }, seconds(10))) {
    throw std::runtime_error("the writer never saw two members accept a write");
  }
  const auto onset = *writer.FirstBoth();
  const double onset_wall =
      WallSeconds(std::chrono::system_clock::now()) - Secs(Clock::now() - onset);
  // The rule needs a scrape inside the window, then up to one evaluation; 90 s is ample.
  testing::WaitFor(
      [&] {
        return FirstFiring(*s.webhook, kDetectorAlert, promote) &&
               FirstFiring(*s.webhook, kRedisRuleAlert, promote);
      },
      seconds(90), milliseconds(100));
  // Whether Sentinel had already turned the promoted replica back (+convert-to-slave).
  const std::string role_before_heal = group.Role(v);
  const auto last_both = writer.LastBoth();
  json trial = {{"trial", t},
                {"master", master},
                {"promoted", victim},
                {"promote_to_onset_s", Secs(onset - promote)},
                {"both_accept_window_s", last_both ? Secs(*last_both - onset) : -1},
                {"sentinel_converted_back", role_before_heal == "slave"},
                {"loadavg", load}};
  for (const std::string name : {kDetectorAlert, kRedisRuleAlert}) {
    const auto first = FirstFiring(*s.webhook, name, promote);
    if (!first) {
      trial[name] = nullptr;
      continue;
    }
    trial[name] = Secs(first->first.at - onset);
    const double starts = ParseRfc3339(first->second.value("startsAt", ""));
    if (starts > 0) trial[name + std::string("_startsAt_after_onset_s")] = starts - onset_wall;
    if (name == std::string(kDetectorAlert)) {
      // Whom it names: the summary carries the zombie and the lock holder.
      trial["detector_alert_summary"] =
          first->second.value("annotations", json::object()).value("summary", "");
    }
  }
  const auto healed =
      RedisCall(v.port, {"REPLICAOF", "127.0.0.1", std::to_string(group.Member(master).port)});
  if (!healed.ok) throw std::runtime_error("REPLICAOF back on " + victim + ": " + healed.error);
  Log("redis: trial " + std::to_string(t) + ": " + trial.dump());
  return trial;
}

}  // namespace

json PartRedis(const RedisPartOptions& o) {
  Stack s;
  StartStack(s, o);
  const std::vector<std::string> systems = {kDetectorAlert, kRedisRuleAlert};
  json trials = json::array();
  std::map<std::string, std::vector<double>> pages, decided;
  std::map<std::string, int> missed, late;  // late: paged after the writer's window closed
  std::vector<double> windows;
  std::mt19937 rng(std::random_device{}());
  for (int t = 1; t <= o.trials; ++t) {
    // Quiet start: the group healthy and agreed on by Sentinel, no alert of ours anywhere.
    const bool quiet = testing::WaitFor(
        [&] {
          return s.group->Healthy() && s.rules->ActiveAlerts() == 0 && ActiveAmAlerts(*s.am) == 0;
        },
        seconds(240), milliseconds(500));
    if (!quiet) throw std::runtime_error("no quiet start before trial " + std::to_string(t));
    const std::string master = s.group->SentinelMaster();
    std::vector<std::string> replicas;
    for (const auto& m : s.group->members()) {
      if (m.name != master) replicas.push_back(m.name);
    }
    // The quiet start comes right after a rule evaluation (the one that resolved the last
    // alert): without this pause every onset would fall at the same phase of the 15 s
    // scrape/evaluation cycle. Not a wait for a condition: it spreads the phase uniformly.
    const double phase_delay = std::uniform_real_distribution<double>(0, 15)(rng);
    std::this_thread::sleep_for(std::chrono::duration<double>(phase_delay));
    const std::string verdict = s.Verdict();
    json trial = Trial(s, t, master, replicas[(t - 1) % replicas.size()]);
    trial["detector_verdict_before"] = verdict;
    trial["phase_delay_s"] = phase_delay;
    for (const auto& name : systems) {
      if (trial[name].is_null()) {
        ++missed[name];
        continue;
      }
      pages[name].push_back(trial[name].get<double>());
      if (trial[name].get<double>() > trial["both_accept_window_s"].get<double>()) ++late[name];
      const std::string key = name + "_startsAt_after_onset_s";
      if (trial.contains(key)) decided[name].push_back(trial[key].get<double>());
    }
    if (trial["both_accept_window_s"].get<double>() >= 0) {
      windows.push_back(trial["both_accept_window_s"].get<double>());
    }
    trials.push_back(trial);
  }
  json out = {{"trials", trials},
              {"down_after_ms", o.down_after_ms},
              {"probe_interval_s", 1},
              {"scrape_and_eval_interval_s", 15},
              {"both_accept_window_median_s", Median(windows)}};
  for (const auto& name : systems) {
    out["summary"][name] = {{"median_s", Median(pages[name])},
                            {"max_s", Max(pages[name])},
                            {"paged", pages[name].size()},
                            {"missed", missed[name]},
                            {"paged_after_window_closed", late[name]},
                            {"startsAt_after_onset_median_s", Median(decided[name])}};
  }
  const double det = Median(pages[kDetectorAlert]);
  const double rule = Median(pages[kRedisRuleAlert]);
  out["summary"][kRedisRuleAlert]["ratio_to_detector_median"] =
      det > 0 && rule > 0 ? rule / det : -1;
  return out;
}

void PrintRedisTable(const json& r, std::ostream& t) {
  const auto& s = r["summary"];
  t << "4. Onset to page, Redis replica promoted by hand (REPLICAOF NO ONE) under 3 sentinels, "
    << r["trials"].size() << " trials (down-after " << r["down_after_ms"]
    << " ms; both accepted writes for a median " << Fixed(r["both_accept_window_median_s"], 1)
    << " s)\n\n"
    << "| system | median s | max s | paged | missed | paged after the window closed | median vs "
       "detector |\n"
    << "|---|---|---|---|---|---|---|\n";
  for (const auto& [key, label] : std::vector<std::pair<std::string, std::string>>{
           {kDetectorAlert, "detector (1 s probe interval)"},
           {kRedisRuleAlert, "rule: count(redis_instance_info{role=\"master\"}) > 1, for 0m"}}) {
    const auto& x = s[key];
    t << "| " << label << " | " << Fixed(x["median_s"]) << " | " << Fixed(x["max_s"]) << " | "
      << x["paged"] << " | " << x["missed"] << " | " << x["paged_after_window_closed"] << " | "
      << (x.contains("ratio_to_detector_median")
              ? Fixed(x["ratio_to_detector_median"].get<double>(), 1) + "x"
              : "1x")
      << " |\n";
  }
  t << "\n";
}

}  // namespace sbd::bench
