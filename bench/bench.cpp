// splitbrain-bench (issue 6): the detector side by side with the rule stack users run today.
//
//   page   time from a real double primary (frozen Patroni leader) to the page at the webhook,
//          for the detector and for postgres_exporter + Prometheus + the two published rules;
//   cost   CPU seconds and peak memory per 1,000 member-probes: the detector against one
//          postgres_exporter per member scraped every second;
//   scale  the detector probing 100 / 1,000 / 5,000 members at a 1 s interval (or
//          --scale-interval) through pgbouncer onto two real PostgreSQL servers: CPU, RSS,
//          round-start jitter, probe latency and the cost of a full /metrics scrape;
//   redis  time from a Redis replica promoted by hand under Sentinel to the page, for the
//          detector and for redis_exporter + Prometheus + count(redis_instance_info{...}) > 1.
//
// Every component is real and listens on free loopback ports; every wait has a deadline. The run
// prints a table and writes the figures as JSON. --smoke runs a tiny variant (seconds) and exits
// non-zero only when a figure is missing.
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "bench/claim_farm.h"
#include "bench/hostile_part.h"
#include "bench/pg_fleet.h"
#include "bench/redis_group.h"
#include "bench/redis_part.h"
#include "bench/watch_variants.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/files.h"
#include "tests/support/patroni_environment.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace sbd::bench {
namespace {

using nlohmann::json;
using sbd::testing::DetectorProcess;
using sbd::testing::FreeLoopbackPort;
using sbd::testing::WaitFor;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

double Secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Options {
  bool smoke = false;
  std::set<std::string> parts = {"page", "cost", "scale", "redis"};
  int trials = 5;
  int transitions = 10;  // part page: switchovers and failovers after the trials
  int redis_trials = 3;
  std::vector<int> scale = {100, 1000, 5000};
  int scale_seconds = 30;  // each of the two windows (without and with /metrics scrapes)
  int scale_interval = 1;  // the scale part's probe interval, seconds (ttl: ten of them)
  int scrape_every = 2;    // seconds between /metrics scrapes in the second window
  int cost_members = 20;   // members (and exporters) of the cost part
  int cost_seconds = 60;   // the cost window
  int bouncers = 2;        // pgbouncer processes the scale members are spread over
  int cluster_size = 3;    // members per cluster in the scale part (1 primary + replicas)
  // pgbouncer's auth_type towards the detector. md5: with SCRAM, 1,000 members connecting at
  // once never all got through (see bench/HISTORY.md).
  std::string bouncer_auth = "md5";
  // shared: every cluster's m1 is the one real primary, so one lineage is writable in every
  // cluster (what the lineage-fork check sees as forks: its worst case). replicas: every member
  // is a replica (verdict no_primary), which leaves the probing machinery alone.
  std::vector<std::string> layouts = {"shared", "replicas"};
  std::string json_path = "bench-results.json";
  std::string detector = SBD_BINARY;
  std::string old_detector;  // part hostile: the build to compare with
  int hostile_black_holed = 1000;
  int hostile_trickling = 200;
  int frozen_rest = 300;         // part frozen-rest: Patroni clusters whose REST never answers
  int claim_members = 10000;     // part claims: HTTP claim members (etcd_election candidates)
  int claim_cluster_size = 100;  // part claims: members per election
  int sentinel_members = 1000;   // part sentinels: Redis members under Sentinel
  std::string work_dir;          // keep sandboxes here instead of a temp dir (debugging)
};

[[noreturn]] void Usage(const std::string& error) {
  std::cerr << "splitbrain-bench: " << error << "\n"
            << "usage: splitbrain-bench [--smoke] "
               "[--parts=page,cost,scale,redis,hostile,frozen-rest,claims,sentinels]\n"
               "         [--trials=N]\n"
               "         [--redis-trials=N] [--transitions=N]\n"
               "         [--scale=100,1000,5000] [--scale-seconds=S] [--scale-interval=S] "
               "[--scrape-every=S]\n"
               "         [--cost-members=N] [--cost-seconds=S] [--bouncers=N]\n"
               "         [--cluster-size=N] [--layouts=shared,replicas]\n"
               "         [--bouncer-auth=scram-sha-256|md5] [--json=FILE]\n"
               "         [--detector=BINARY] [--old-detector=BINARY]\n"
               "         [--hostile-black-holed=N] [--hostile-trickling=N] [--frozen-rest=N]\n"
               "         [--claim-members=N] [--claim-cluster-size=N] [--sentinel-members=N]\n";
  std::exit(1);
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  bool parts_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    auto number = [&] {
      try {
        const int n = std::stoi(value);
        if (n <= 0) throw std::invalid_argument("not positive");
        return n;
      } catch (const std::exception&) {
        Usage("bad number in " + arg);
      }
    };
    if (key == "--smoke") {
      o.smoke = true;
    } else if (key == "--parts") {
      parts_given = true;
      o.parts.clear();
      for (const auto& p : Split(value)) {
        if (p != "page" && p != "cost" && p != "scale" && p != "redis" && p != "hostile" &&
            p != "frozen-rest" && p != "claims" && p != "sentinels") {
          Usage("unknown part " + p);
        }
        o.parts.insert(p);
      }
    } else if (key == "--trials") {
      o.trials = number();
    } else if (key == "--transitions") {
      o.transitions = number();
    } else if (key == "--redis-trials") {
      o.redis_trials = number();
    } else if (key == "--scale") {
      o.scale.clear();
      for (const auto& n : Split(value)) o.scale.push_back(std::stoi(n));
    } else if (key == "--scale-seconds") {
      o.scale_seconds = number();
    } else if (key == "--scale-interval") {
      o.scale_interval = number();
    } else if (key == "--scrape-every") {
      o.scrape_every = number();
    } else if (key == "--cost-members") {
      o.cost_members = number();
    } else if (key == "--cost-seconds") {
      o.cost_seconds = number();
    } else if (key == "--bouncers") {
      o.bouncers = number();
    } else if (key == "--cluster-size") {
      o.cluster_size = number();
    } else if (key == "--layouts") {
      o.layouts = Split(value);
      for (const auto& l : o.layouts) {
        if (l != "shared" && l != "replicas") Usage("--layouts: shared,replicas");
      }
    } else if (key == "--bouncer-auth") {
      if (value != "scram-sha-256" && value != "md5") Usage("--bouncer-auth: scram-sha-256|md5");
      o.bouncer_auth = value;
    } else if (key == "--json") {
      o.json_path = value;
    } else if (key == "--detector") {
      o.detector = value;
    } else if (key == "--old-detector") {
      o.old_detector = value;
    } else if (key == "--hostile-black-holed") {
      o.hostile_black_holed = number();
    } else if (key == "--hostile-trickling") {
      o.hostile_trickling = number();
    } else if (key == "--frozen-rest") {
      o.frozen_rest = number();
    } else if (key == "--claim-members") {
      o.claim_members = number();
    } else if (key == "--claim-cluster-size") {
      o.claim_cluster_size = number();
    } else if (key == "--sentinel-members") {
      o.sentinel_members = number();
    } else {
      Usage("unknown argument " + arg);
    }
  }
  if (o.smoke) {
    // Seconds, not minutes: no Patroni (its cluster alone takes half a minute to form).
    if (!parts_given) o.parts = {"cost", "scale"};
    o.scale = {9};
    o.scale_seconds = 3;
    o.scrape_every = 1;
    o.cost_members = 2;
    o.cost_seconds = 3;
    o.bouncers = 1;
    o.layouts = {"shared"};
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// Real components the parts share

/// prometheus-postgres-exporter (0.11) for one member, with the queries file that yields
/// pg_replication_is_replica (0.11 dropped it from its defaults).
constexpr const char* kExporterQueries = R"(pg_replication:
  query: "SELECT CASE WHEN NOT pg_is_in_recovery() THEN 0 ELSE GREATEST(0, EXTRACT(EPOCH FROM (now() - pg_last_xact_replay_timestamp()))) END AS lag, CASE WHEN pg_is_in_recovery() THEN 1 ELSE 0 END AS is_replica"
  master: true
  metrics:
    - lag:
        usage: "GAUGE"
        description: "Replication lag behind master in seconds"
    - is_replica:
        usage: "GAUGE"
        description: "Indicates if the server is a replica"
)";

std::string ExporterBinary() {
  const char* env = std::getenv("SBD_POSTGRES_EXPORTER");
  if (env != nullptr && *env != '\0') return env;
  return testing::FindExecutable("prometheus-postgres-exporter");
}

class Exporter {
 public:
  Exporter(const std::string& dir, const std::string& name, int pg_port,
           const std::string& queries_file) {
    const std::string binary = ExporterBinary();
    if (binary.empty()) throw std::runtime_error("prometheus-postgres-exporter not installed");
    port_ = FreeLoopbackPort();
    log_ = dir + "/exporter-" + name + ".log";
    const std::string dsn = "postgresql://" + std::string(testing::PgSandbox::kMonitorUser) + ":" +
                            testing::PgSandbox::kMonitorPassword +
                            "@127.0.0.1:" + std::to_string(pg_port) + "/postgres?sslmode=disable";
    // env(1) execs the exporter in place: the pid is the exporter's.
    pid_ =
        testing::SpawnBackgroundProcess({"/usr/bin/env", "DATA_SOURCE_NAME=" + dsn, binary,
                                         "--web.listen-address=127.0.0.1:" + std::to_string(port_),
                                         "--extend.query-path=" + queries_file, "--log.level=warn"},
                                        log_, DieWithParent(false));
    std::string how;
    const auto outcome = testing::WaitUntilReady(
        pid_,
        [&] {
          return HttpGetTimed(port_, "/metrics", seconds(5))
                     .body.find("pg_replication_is_replica") != std::string::npos;
        },
        seconds(30), milliseconds(200), &how);
    if (outcome != testing::StartupOutcome::kReady) {
      throw std::runtime_error("postgres_exporter " + name + " not ready (" + how + "):\n" +
                               testing::Tail(log_, 20));
    }
  }
  ~Exporter() { testing::StopChildProcess(pid_, SIGTERM, seconds(5)); }
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
  std::string log_;
};

/// The detector binary on a config, waited on until /-/ready.
struct Detector {
  int port = FreeLoopbackPort();
  std::unique_ptr<DetectorProcess> process;
  double startup_seconds = 0;

  Detector(const std::string& binary, const std::string& config_file, const std::string& log,
           seconds ready_deadline) {
    const auto start = Clock::now();
    process = std::make_unique<DetectorProcess>(
        binary,
        std::vector<std::string>{"--config.file=" + config_file,
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port),
                                 "--log.level=warn"},
        log);
    if (!WaitFor([&] { return testing::HttpGet(port, "/-/ready") == "Ready\n"; }, ready_deadline,
                 milliseconds(100))) {
      throw std::runtime_error("detector not ready within " +
                               std::to_string(ready_deadline.count()) + " s:\n" +
                               testing::Tail(log, 30));
    }
    startup_seconds = Secs(Clock::now() - start);
  }
  pid_t pid() const { return process->pid(); }
  /// Throws with the log tail when the detector has exited (e.g. crashed) since it started.
  void CheckAlive(const std::string& log) const {
    if (!testing::ProcessAlive(process->pid())) {
      throw std::runtime_error("the detector exited:\n" + testing::Tail(log, 30));
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Part 1: time to page

/// postgres_exporter per member, Prometheus 2.42 scraping them in one job with member labels,
/// and the two published rules, at 15 s scrape and evaluation intervals.
class RuleStack {
 public:
  static constexpr const char* kGitLab = "PostgresSplitBrainGitLab";
  static constexpr const char* kCommunity = "PostgresSplitBrainCommunity";

  RuleStack(const std::string& dir, const std::vector<testing::PatroniMember>& members,
            const std::string& alertmanager_url) {
    testing::MakeDir(dir, 0755);
    queries_ = testing::WriteFile(dir, "queries.yml", kExporterQueries);
    for (const auto& m : members) {
      exporters_.push_back(std::make_unique<Exporter>(dir, m.name, m.pg_port, queries_));
    }
    const std::string rules = testing::WriteFile(dir, "rules.yml", std::string(R"(groups:
  - name: gitlab
    rules:
      - alert: )") + kGitLab + R"(
        expr: count by (env, type, job) (pg_replication_is_replica{type!=""} == 0) > 1
        for: 1m
        labels: {severity: critical}
  - name: community
    rules:
      - alert: )" + kCommunity + R"(
        expr: count(pg_replication_is_replica == 0) != 1
        for: 0m
        labels: {severity: critical}
)");
    std::string config =
        "global:\n  scrape_interval: 15s\n  evaluation_interval: 15s\nrule_files: [" + rules +
        "]\nalerting:\n  alertmanagers:\n    - api_version: v2\n      static_configs:\n"
        "        - targets: ['" +
        alertmanager_url.substr(alertmanager_url.find("//") + 2) +
        "']\nscrape_configs:\n  - job_name: postgres\n    static_configs:\n";
    for (size_t i = 0; i < members.size(); ++i) {
      config += "      - targets: ['127.0.0.1:" + std::to_string(exporters_[i]->port()) +
                "']\n        labels: {env: bench, type: patroni, member: " + members[i].name +
                "}\n";
    }
    const std::string config_file = testing::WriteFile(dir, "prometheus.yml", config);
    port_ = FreeLoopbackPort();
    log_ = dir + "/prometheus.log";
    const std::string binary = testing::FindExecutable("prometheus");
    if (binary.empty()) throw std::runtime_error("prometheus not installed");
    pid_ = testing::SpawnBackgroundProcess(
        {binary, "--config.file=" + config_file, "--storage.tsdb.path=" + dir + "/data",
         "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
        log_, DieWithParent(false));
    std::string how;
    // Ready, the Alertmanager discovered (alerts fired before that are dropped) and every
    // exporter scraped once.
    const auto outcome = testing::WaitUntilReady(
        pid_,
        [&] {
          if (HttpGetTimed(port_, "/-/ready", seconds(2)).status != 200) return false;
          const auto self = HttpGetTimed(port_, "/metrics", seconds(5)).body;
          if (testing::MetricValue(self, "prometheus_notifications_alertmanagers_discovered") < 1) {
            return false;
          }
          return UpTargets() == static_cast<int>(members.size());
        },
        seconds(90), milliseconds(500), &how);
    if (outcome != testing::StartupOutcome::kReady) {
      throw std::runtime_error("prometheus not ready (" + how + "):\n" + testing::Tail(log_, 20));
    }
  }
  ~RuleStack() { Stop(); }

  void Stop() {
    if (pid_ > 0) testing::StopChildProcess(pid_, SIGTERM, seconds(10));
    pid_ = -1;
  }

  int UpTargets() const {
    const auto r =
        HttpGetTimed(port_, "/api/v1/query?query=sum(up%7Bjob%3D%22postgres%22%7D)", seconds(5));
    if (r.status != 200) return -1;
    try {
      const json j = json::parse(r.body);
      const auto& result = j["data"]["result"];
      if (result.empty()) return 0;
      return std::stoi(result[0]["value"][1].get<std::string>());
    } catch (const std::exception&) {
      return -1;
    }
  }

  /// Pending or firing rule alerts of ours; -1 when Prometheus cannot be asked.
  int ActiveRuleAlerts() const {
    const auto r = HttpGetTimed(port_, "/api/v1/alerts", seconds(5));
    if (r.status != 200) return -1;
    int n = 0;
    const json reply = json::parse(r.body);  // kept: the loop reads into it
    for (const auto& a : reply["data"]["alerts"]) {
      const std::string name = a["labels"].value("alertname", "");
      if (name == kGitLab || name == kCommunity) ++n;
    }
    return n;
  }

  const std::vector<std::unique_ptr<Exporter>>& exporters() const { return exporters_; }

 private:
  std::string queries_;
  std::vector<std::unique_ptr<Exporter>> exporters_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::string log_;
};

int ActiveAmAlerts(const testing::AlertmanagerServer& am) {
  int n = 0;
  try {
    for (const auto& a : am.Alerts()) {
      const std::string name = a["labels"].value("alertname", "");
      if (name == "SplitBrain" || name == RuleStack::kGitLab || name == RuleStack::kCommunity) ++n;
    }
  } catch (const std::exception&) {
    return -1;
  }
  return n;
}

// Switchovers and failovers (every fifth), each waited for: the SplitBrain and
// SplitBrainSuspected alerts any detector delivered meanwhile, per cluster name.
json Transitions(testing::Environment& env, const WatchVariants& watch, int count) {
  env.cluster->WaitHealthy(seconds(120));
  const auto since = Clock::now();
  for (int i = 1; i <= count; ++i) {
    std::string moved;
    if (i % 5 == 0) {
      std::string candidate;
      for (const auto& m : env.cluster->members()) {
        if (m.name != env.cluster->Leader()) candidate = m.name;
      }
      moved = env.cluster->Failover(candidate);
    } else {
      moved = env.cluster->Switchover();
    }
    Log("page: transition " + std::to_string(i) + " of " + std::to_string(count) + ": to " + moved);
    env.cluster->WaitHealthy(seconds(120));
  }
  WaitFor([] { return false; }, seconds(5));  // an absence: Alertmanager's group_wait is 1 s
  return {{"count", count},
          {"switchovers", count - count / 5},
          {"failovers", count / 5},
          {"alerts", watch.WarningsSince(since)}};
}

json PartPage(const Options& o) {
  Log("page: starting etcd, 3-member Patroni, Alertmanager, detector");
  testing::Environment env(o.detector);
  Log("page: starting one postgres_exporter per member and Prometheus (15 s scrape/eval)");
  RuleStack stack(env.root.path() + "/rulestack", env.cluster->members(), env.alertmanager->url());
  Log("page: starting four more detectors: polling only and with the watch, at 1 s and 5 s");
  WatchVariants watch(o.detector, env);
  const std::vector<std::string> systems = {"SplitBrain", RuleStack::kGitLab,
                                            RuleStack::kCommunity};
  json trials = json::array();
  std::map<std::string, std::vector<double>> pages;
  std::map<std::string, int> missed;
  std::map<std::string, std::vector<double>> decided;
  for (int t = 1; t <= o.trials; ++t) {
    // Quiet start: a healthy cluster, no alert of ours active anywhere.
    env.cluster->WaitHealthy(seconds(120));
    const bool quiet = WaitFor(
        [&] {
          return env.Verdict() == "healthy" && stack.ActiveRuleAlerts() == 0 &&
                 ActiveAmAlerts(*env.alertmanager) == 0 && watch.Quiet();
        },
        seconds(240), milliseconds(500));
    if (!quiet) throw std::runtime_error("alerts did not clear before trial " + std::to_string(t));
    const std::string leader = env.cluster->Leader();
    testing::WritablePoller poller(env.cluster->members());
    const std::string load = LoadAvg();
    const auto freeze = Clock::now();
    env.cluster->FreezePatroni(leader);
    Log("page: trial " + std::to_string(t) + ": froze the Patroni of " + leader);
    if (!WaitFor([&] { return poller.SecondWritableAt().has_value(); },
                 seconds(3 * testing::kSandboxTtlSeconds))) {
      env.cluster->ThawPatroni(leader);
      throw std::runtime_error("no second writable member after the freeze");
    }
    const auto onset = *poller.SecondWritableAt();
    // The same instant on the wall clock, to set against the alerts' startsAt.
    const double onset_wall =
        WallSeconds(std::chrono::system_clock::now()) - Secs(Clock::now() - onset);
    // The GitLab rule needs up to 15 s scrape + 15 s eval + 1 m for + 15 s eval.
    const auto deadline = seconds(150);
    WaitFor(
        [&] {
          for (const auto& s : systems) {
            if (env.Notifications(s, "firing", freeze).empty()) return false;
          }
          return true;
        },
        deadline, milliseconds(100));
    json trial = {{"trial", t},
                  {"frozen_leader", leader},
                  {"freeze_to_onset_s", Secs(onset - freeze)},
                  {"loadavg", load}};
    for (const auto& s : systems) {
      const auto n = env.Notifications(s, "firing", freeze);
      if (n.empty()) {
        trial[s] = nullptr;
        ++missed[s];
      } else {
        const double d = Secs(n.front().at - onset);
        trial[s] = d;
        pages[s].push_back(d);
        // Where the time went: onset -> the alert's startsAt (the detector's decision; for a
        // rule, the evaluation that first saw it), then -> the webhook (for: hold, Alertmanager
        // group_wait and delivery).
        for (const auto& a : n.front().body["alerts"]) {
          if (a["labels"].value("alertname", "") != s) continue;
          const double starts = ParseRfc3339(a.value("startsAt", ""));
          if (starts > 0) {
            trial[s + "_startsAt_after_onset_s"] = starts - onset_wall;
            decided[s].push_back(starts - onset_wall);
          }
          break;
        }
      }
    }
    trial["watch"] = watch.Trial(freeze, onset, onset_wall, seconds(30));
    Log("page: trial " + std::to_string(t) + ": " + trial.dump());
    trials.push_back(trial);
    env.cluster->ThawPatroni(leader);
    env.cluster->Heal();
  }
  json out = {{"trials", trials},
              {"transitions", Transitions(env, watch, o.transitions)},
              {"watch_summary", WatchVariants::Summary(trials)},
              {"ttl_s", testing::kSandboxTtlSeconds},
              {"probe_interval_s", 1},
              {"scrape_and_eval_interval_s", 15}};
  for (const auto& s : systems) {
    out["summary"][s] = {{"median_s", Median(pages[s])},
                         {"max_s", Max(pages[s])},
                         {"paged", pages[s].size()},
                         {"missed", missed[s]},
                         {"startsAt_after_onset_median_s", Median(decided[s])}};
  }
  const double det = Median(pages["SplitBrain"]);
  for (const auto& s : {RuleStack::kGitLab, RuleStack::kCommunity}) {
    const double m = Median(pages[s]);
    out["summary"][s]["ratio_to_detector_median"] = det > 0 && m > 0 ? m / det : -1;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Parts 2 and 3 run on a PostgreSQL primary and its streaming replica.

std::string MemberYaml(const std::string& name, const std::string& dsn,
                       const std::string& password_file) {
  return "      - name: " + name + "\n        dsn: \"" + dsn +
         "\"\n        password_file: " + password_file + "\n";
}

std::string ClusterYaml(const std::string& name, int interval_s = 1) {
  return "  - name: " + name + "\n    ttl: " + std::to_string(10 * interval_s) +
         "s\n    probe_interval: " + std::to_string(interval_s) +
         "s\n    probe_timeout: 800ms\n    members:\n";
}

double SumProbes(const std::string& metrics) {
  double sum = 0;
  for (const auto& s : ParseExposition(metrics, "splitbrain_probes_total")) sum += s.value;
  return sum;
}

json PartCost(const Options& o, PgPair& pg) {
  const int members = std::max(2, o.cost_members - o.cost_members % 2);
  Log("cost: " + std::to_string(members) +
      " members: one postgres_exporter each, and the detector");
  const std::string dir = pg.sandbox.root() + "/cost";
  testing::MakeDir(dir, 0755);
  const std::string queries = testing::WriteFile(dir, "queries.yml", kExporterQueries);
  // Members alternate between the primary and the replica, directly (no pooler): pairs form
  // clusters of one primary and one replica.
  std::vector<std::unique_ptr<Exporter>> exporters;
  std::string yaml = "clusters:\n";
  for (int i = 0; i < members; ++i) {
    const bool primary = i % 2 == 0;
    const testing::PgInstance& server = primary ? *pg.primary : *pg.replica;
    const std::string name = "m" + std::to_string(i + 1);
    if (primary) yaml += ClusterYaml("cost" + std::to_string(i / 2 + 1));
    // fallback_application_name only makes each member's DSN distinct.
    yaml += MemberYaml(name, server.MonitorDsn() + " fallback_application_name=" + name,
                       pg.sandbox.PasswordFile());
    exporters.push_back(std::make_unique<Exporter>(dir, name, server.port(), queries));
  }
  const std::string config = testing::WriteFile(dir, "detector.yml", yaml);
  Detector detector(o.detector, config, dir + "/detector.log", seconds(60));
  // Warm up: every exporter scraped once more, every member probed a few rounds.
  WaitFor([] { return false; }, seconds(2));

  std::atomic<bool> stop{false};
  std::vector<std::atomic<long>> scrapes(exporters.size());
  std::vector<std::thread> scrapers;
  const std::string load_start = LoadAvg();
  const std::string det_metrics_start = testing::HttpGet(detector.port, "/metrics");
  const ProcUsage det_start = ReadProcUsage(detector.pid());
  std::vector<ProcUsage> exp_start;
  for (const auto& e : exporters) exp_start.push_back(ReadProcUsage(e->pid()));
  const auto start = Clock::now();
  const auto end = start + seconds(o.cost_seconds);
  for (size_t i = 0; i < exporters.size(); ++i) {
    // What Prometheus would do at a 1 s scrape interval: one GET /metrics per exporter per second.
    scrapers.emplace_back([&, i] {
      auto next = start;
      while (!stop && next < end) {
        const auto r = HttpGetTimed(exporters[i]->port(), "/metrics", seconds(5));
        if (r.status == 200) ++scrapes[i];
        next += seconds(1);
        std::this_thread::sleep_until(next);
      }
    });
  }
  for (auto& t : scrapers) t.join();
  const double window = Secs(Clock::now() - start);
  detector.CheckAlive(dir + "/detector.log");
  const ProcUsage det_end = ReadProcUsage(detector.pid());
  const double det_probes =
      SumProbes(testing::HttpGet(detector.port, "/metrics")) - SumProbes(det_metrics_start);
  double exp_cpu = 0, exp_hwm = 0, exp_rss = 0;
  long exp_scrapes = 0;
  for (size_t i = 0; i < exporters.size(); ++i) {
    const ProcUsage u = ReadProcUsage(exporters[i]->pid());
    exp_cpu += u.cpu_seconds - exp_start[i].cpu_seconds;
    exp_hwm += u.hwm_mb;
    exp_rss += u.rss_mb;
    exp_scrapes += scrapes[i];
  }
  const double det_cpu = det_end.cpu_seconds - det_start.cpu_seconds;
  json out = {{"members", members},
              {"window_s", window},
              {"loadavg_start", load_start},
              {"loadavg_end", LoadAvg()},
              {"detector",
               {{"member_probes", det_probes},
                {"cpu_s", det_cpu},
                {"cpu_s_per_1000_probes", det_probes > 0 ? det_cpu / det_probes * 1000 : -1},
                {"peak_rss_mb", det_end.hwm_mb},
                {"rss_mb", det_end.rss_mb},
                {"processes", 1}}},
              {"postgres_exporter",
               {{"member_probes", exp_scrapes},
                {"cpu_s", exp_cpu},
                {"cpu_s_per_1000_probes", exp_scrapes > 0 ? exp_cpu / exp_scrapes * 1000 : -1},
                {"peak_rss_mb", exp_hwm},
                {"rss_mb", exp_rss},
                {"processes", exporters.size()}}}};
  const double d = out["detector"]["cpu_s_per_1000_probes"];
  const double e = out["postgres_exporter"]["cpu_s_per_1000_probes"];
  out["cpu_ratio_exporter_to_detector"] = d > 0 && e > 0 ? e / d : -1;
  Log("cost: " + out.dump());
  return out;
}

/// One /metrics scrape of the scale part, reduced to what the figures need.
struct ClusterRound {
  double rounds = 0, end_ts = 0, duration = 0, overruns = 0;
};

// Runs `binary` on `config` (every member answering at `o.scale_interval`), then two windows
// of o.scale_seconds: its own CPU with no scrapes, then a /metrics scrape every
// o.scrape_every seconds, from which the rounds' start lateness and probe durations are read.
json MeasureScale(const Options& o, const std::string& binary, const std::string& config,
                  const std::string& dir, int members) {
  Detector detector(binary, config, dir + "/detector.log", seconds(180));
  // Every member answering before the windows start (connections are set up in the first
  // rounds: SCRAM through pgbouncer).
  double up = 0, up_max = 0;
  const auto up_start = Clock::now();
  const bool all_up = WaitFor(
      [&] {
        // A slow scrape is not "nobody up": keep the last answer that came.
        const auto r = HttpGetTimed(detector.port, "/metrics", seconds(60));
        if (r.status != 200) return false;
        up = 0;
        for (const auto& s : ParseExposition(r.body, "splitbrain_member_up{")) up += s.value;
        up_max = std::max(up_max, up);
        return up >= members;
      },
      seconds(180), milliseconds(5000));  // a scrape of thousands of members is load too
  const double all_up_s = detector.startup_seconds + Secs(Clock::now() - up_start);
  std::map<std::string, double> reasons;
  for (const auto& s : ParseExposition(HttpGetTimed(detector.port, "/metrics", seconds(60)).body,
                                       "splitbrain_probe_failures_total{")) {
    reasons[s.labels.count("reason") ? s.labels.at("reason") : "?"] += s.value;
  }
  std::string failures;
  for (const auto& [reason, n] : reasons) failures += " " + reason + "=" + Fixed(n, 0);
  Log("scale: probe failures so far by reason:" + failures);
  detector.CheckAlive(dir + "/detector.log");
  if (up_max == 0) {
    throw std::runtime_error("no member answered the detector:\n" +
                             testing::Tail(dir + "/detector.log", 30));
  }
  Log("scale: " + std::to_string(members) + ": ready in " + Fixed(detector.startup_seconds) +
      " s, " + std::to_string(static_cast<int>(up)) + " members up after " + Fixed(all_up_s) +
      " s");

  // Window A: no scrapes; the detector's own CPU for probing.
  const std::string load_a = LoadAvg();
  ProcUsage a0 = ReadProcUsage(detector.pid());
  double rss_max = a0.rss_mb;
  const auto a_start = Clock::now();
  auto tick = a_start;
  while (Clock::now() < a_start + seconds(o.scale_seconds)) {
    tick += seconds(1);
    std::this_thread::sleep_until(tick);
    rss_max = std::max(rss_max, ReadProcUsage(detector.pid()).rss_mb);
  }
  ProcUsage a1 = ReadProcUsage(detector.pid());
  const double a_window = Secs(Clock::now() - a_start);
  const double cpu_cores = (a1.cpu_seconds - a0.cpu_seconds) / a_window;

  // Window B: a full /metrics scrape every scrape_every seconds; rounds and probe durations
  // are read from it.
  std::map<std::string, std::map<double, ClusterRound>> rounds;  // cluster -> rounds -> round
  std::map<std::string, std::map<double, double>> latencies;     // cluster/member -> rounds -> s
  std::vector<double> scrape_s, scrape_bytes;
  double overruns_start = -1, overruns_end = 0, failures_start = -1, failures_end = 0;
  double up_end = 0;
  const ProcUsage b0 = ReadProcUsage(detector.pid());
  const auto b_start = Clock::now();
  tick = b_start;
  while (Clock::now() < b_start + seconds(o.scale_seconds)) {
    const auto r = HttpGetTimed(detector.port, "/metrics");
    rss_max = std::max(rss_max, ReadProcUsage(detector.pid()).rss_mb);
    if (r.status == 200) {
      scrape_s.push_back(r.seconds);
      scrape_bytes.push_back(static_cast<double>(r.body.size()));
      std::map<std::string, ClusterRound> now;
      double overruns = 0, failures = 0, up_now = 0;
      for (const auto& s : ParseExposition(r.body, "splitbrain_")) {
        const auto c = s.labels.find("cluster");
        if (c == s.labels.end()) continue;
        if (s.name == "splitbrain_rounds_total") now[c->second].rounds = s.value;
        if (s.name == "splitbrain_round_last_timestamp_seconds") now[c->second].end_ts = s.value;
        if (s.name == "splitbrain_round_duration_seconds") now[c->second].duration = s.value;
        if (s.name == "splitbrain_round_overruns_total") {
          now[c->second].overruns = s.value;
          overruns += s.value;
        }
        if (s.name == "splitbrain_probe_failures_total") failures += s.value;
        if (s.name == "splitbrain_member_up") up_now += s.value;
      }
      for (const auto& s : ParseExposition(r.body, "splitbrain_probe_duration_seconds{")) {
        const std::string c = s.labels.at("cluster");
        latencies[c + "/" + s.labels.at("member")][now[c].rounds] = s.value;
      }
      for (const auto& [c, round] : now) rounds[c][round.rounds] = round;
      if (overruns_start < 0) overruns_start = overruns;
      if (failures_start < 0) failures_start = failures;
      overruns_end = overruns;
      up_end = up_now;
      failures_end = failures;
    }
    tick += seconds(o.scrape_every);
    std::this_thread::sleep_until(tick);
  }
  const ProcUsage b1 = ReadProcUsage(detector.pid());
  detector.CheckAlive(dir + "/detector.log");
  const double b_window = Secs(Clock::now() - b_start);

  // Round-start lateness: per cluster (and per overrun segment), the schedule is anchored at
  // its least late observed round; lateness = start - (anchor + k * interval).
  std::vector<double> jitter_ms;
  for (const auto& [cluster, by_round] : rounds) {
    std::map<double, std::vector<std::pair<double, double>>> segments;  // overruns -> (k, start)
    for (const auto& [k, r] : by_round) {
      if (k < 1) continue;
      segments[r.overruns].emplace_back(k, r.end_ts - r.duration);
    }
    for (const auto& [ignored, points] : segments) {
      double anchor = 1e300;
      const double interval = o.scale_interval;
      for (const auto& [k, start] : points) anchor = std::min(anchor, start - k * interval);
      for (const auto& [k, start] : points) {
        jitter_ms.push_back((start - k * interval - anchor) * 1000);
      }
    }
  }
  std::vector<double> latency_ms;
  for (const auto& [member, by_round] : latencies) {
    for (const auto& [k, s] : by_round) latency_ms.push_back(s * 1000);
  }
  json out = {{"members", members},
              {"probe_interval_s", o.scale_interval},
              {"startup_ready_s", detector.startup_seconds},
              {"all_members_up_s", all_up ? all_up_s : -1},
              {"members_up_before_windows", up},
              {"members_up_max_before_windows", up_max},
              {"members_up_at_end", up_end},
              {"window_s", a_window},
              {"loadavg", load_a},
              {"cpu_cores", cpu_cores},
              {"cpu_cores_with_scrapes", (b1.cpu_seconds - b0.cpu_seconds) / b_window},
              {"rss_mb_max", rss_max},
              {"peak_rss_mb", b1.hwm_mb},
              {"threads", b1.threads},
              {"round_jitter_ms_p50", Percentile(jitter_ms, 0.5)},
              {"round_jitter_ms_p99", Percentile(jitter_ms, 0.99)},
              {"round_jitter_ms_max", Max(jitter_ms)},
              {"round_samples", jitter_ms.size()},
              {"overruns_in_window", overruns_end - overruns_start},
              {"probe_failures_in_window", failures_end - failures_start},
              {"probe_latency_ms_p50", Percentile(latency_ms, 0.5)},
              {"probe_latency_ms_p99", Percentile(latency_ms, 0.99)},
              {"probe_samples", latency_ms.size()},
              {"metrics_scrape_ms_p50", Percentile(scrape_s, 0.5) * 1000},
              {"metrics_scrape_ms_max", Max(scrape_s) * 1000},
              {"metrics_bytes", Max(scrape_bytes)},
              {"scrapes", scrape_s.size()}};
  for (const char* k : {"metrics_scrape_ms_p50", "metrics_scrape_ms_max"}) {
    if (scrape_s.empty()) out[k] = -1;
  }
  return out;
}

json ScaleOne(const Options& o, PgPair& pg, const std::vector<std::unique_ptr<Bouncer>>& bouncers,
              int members, const std::string& layout) {
  const std::string dir = pg.sandbox.root() + "/scale-" + layout + "-" + std::to_string(members);
  testing::MakeDir(dir, 0755);
  const int size = std::max(1, o.cluster_size);
  const int clusters = (members + size - 1) / size;
  std::string yaml = "clusters:\n";
  int written = 0;
  for (int c = 0; c < clusters; ++c) {
    char name[16];
    std::snprintf(name, sizeof name, "c%05d", c + 1);
    yaml += ClusterYaml(name, o.scale_interval);
    const Bouncer& b = *bouncers[c % bouncers.size()];
    for (int m = 0; m < size && written < members; ++m, ++written) {
      // m1 is the primary; the others are the replica, each through its own alias so that
      // the DSNs of a cluster differ, as real members' do.
      const std::string alias =
          m == 0 && layout == "shared" ? "primary" : "replica" + std::to_string(std::max(1, m));
      yaml += MemberYaml("m" + std::to_string(m + 1), b.Dsn(alias), pg.sandbox.PasswordFile());
    }
  }
  const std::string config = testing::WriteFile(dir, "detector.yml", yaml);
  Log("scale: " + layout + ": " + std::to_string(members) + " members in " +
      std::to_string(clusters) + " clusters; starting the detector");
  json out = MeasureScale(o, o.detector, config, dir, members);
  out["clusters"] = clusters;
  out["cluster_size"] = size;
  out["layout"] = layout;
  out["bouncer_auth"] = o.bouncer_auth;
  out["bouncers"] = bouncers.size();
  Log("scale: " + out.dump());
  return out;
}

json PartScale(const Options& o, PgPair& pg) {
  std::vector<std::unique_ptr<Bouncer>> bouncers;
  std::map<std::string, int> aliases = {{"primary", pg.primary->port()}};
  for (int m = 1; m < std::max(2, o.cluster_size); ++m) {
    aliases["replica" + std::to_string(m)] = pg.replica->port();
  }
  for (int i = 0; i < o.bouncers; ++i) {
    bouncers.push_back(std::make_unique<Bouncer>(
        pg.sandbox.root() + "/pgbouncer" + std::to_string(i + 1), aliases, o.bouncer_auth));
  }
  json out = json::array();
  for (const auto& layout : o.layouts) {
    for (int n : o.scale) {
      try {
        out.push_back(ScaleOne(o, pg, bouncers, n, layout));
      } catch (const std::exception& e) {
        // One size failing (e.g. the detector saturated) must not lose the others.
        Log("scale: " + layout + " " + std::to_string(n) + " failed: " + e.what());
        out.push_back({{"members", n}, {"layout", layout}, {"error", e.what()}});
      }
    }
  }
  return out;
}

// Runs `yaml` (a config of `members` members in `clusters` clusters) on the new build and, with
// --old-detector, on that build right after, on the same servers; measured as the scale part
// measures PostgreSQL members. `requests`, when given, counts what the servers answered, for
// a per-second figure beside each run.
json MeasureBuilds(const Options& o, const std::string& part, const std::string& root,
                   const std::string& yaml, int members, int clusters, int cluster_size,
                   const std::function<std::uint64_t()>& requests = {}) {
  json runs = json::array();
  std::vector<std::pair<std::string, std::string>> builds = {{"new", o.detector}};
  if (!o.old_detector.empty()) builds.emplace_back("old", o.old_detector);
  for (const auto& [build, binary] : builds) {
    const std::string dir = root + "/" + build;
    testing::MakeDir(dir, 0755);
    const std::string config = testing::WriteFile(dir, "detector.yml", yaml);
    Log(part + ": " + build + ": " + std::to_string(members) + " members in " +
        std::to_string(clusters) + " clusters");
    const std::uint64_t before = requests ? requests() : 0;
    const auto start = Clock::now();
    json out = MeasureScale(o, binary, config, dir, members);
    out["build"] = build;
    out["binary"] = binary;
    out["clusters"] = clusters;
    out["cluster_size"] = cluster_size;
    if (requests) {
      out["farm_requests_per_s"] =
          static_cast<double>(requests() - before) / Secs(Clock::now() - start);
    }
    Log(part + ": " + out.dump());
    runs.push_back(out);
  }
  return runs;
}

// Issue 25's second row: claim members (candidates' HTTP /metrics endpoints, one ClaimFarm
// standing for all of them) in etcd elections of o.claim_cluster_size on a real etcd, probed at
// o.scale_interval.
json PartClaims(const Options& o) {
  testing::TempDir root("sbd-bench-claims-");
  Log("claims: starting etcd and the claim farm");
  testing::EtcdServer etcd(root.path() + "/etcd");
  ClaimFarm farm;
  const int size = std::max(1, o.claim_cluster_size);
  const int clusters = (o.claim_members + size - 1) / size;
  std::string yaml = "clusters:\n";
  int written = 0;
  for (int c = 0; c < clusters; ++c) {
    char name[16];
    std::snprintf(name, sizeof name, "e%05d", c + 1);
    yaml += std::string("  - name: ") + name +
            "\n    kind: etcd_election\n    ttl: " + std::to_string(10 * o.scale_interval) +
            "s\n    probe_interval: " + std::to_string(o.scale_interval) +
            "s\n    probe_timeout: 800ms\n    etcd_election:\n      endpoints: [" +
            etcd.endpoint() + "]\n      prefix: /election/" + name +
            "\n      claim:\n        token_label: token\n    members:\n";
    for (int m = 0; m < size && written < o.claim_members; ++m, ++written) {
      yaml += "      - name: m" + std::to_string(m + 1) +
              "\n        metrics_url: http://127.0.0.1:" + std::to_string(farm.port()) + "/" +
              name + "/m" + std::to_string(m + 1) + "\n";
    }
  }
  json runs = MeasureBuilds(o, "claims", root.path(), yaml, o.claim_members, clusters, size,
                            [&farm] { return farm.requests(); });
  for (auto& run : runs) run["farm_connections"] = farm.connections();
  return runs;
}

// Issue 25's third row: Redis members under Sentinel at o.scale_interval. One real group (a
// master, two replicas, three sentinels) stands for every cluster: o.sentinel_members members
// in clusters of three, each cluster's members the group's three servers and its lock store the
// group's sentinels, so every member read is a real INFO from a real redis-server and every
// store read a real SENTINEL query, as 1,000 members' would be (1,000 redis-server processes
// and their sentinels do not fit this machine).
json PartSentinels(const Options& o) {
  Log("sentinels: starting a Redis master, two replicas and three sentinels");
  RedisGroup group("bench", 2, milliseconds(5000));
  const int size = static_cast<int>(group.members().size());
  const int clusters = (o.sentinel_members + size - 1) / size;
  std::string sentinels;
  for (const auto& s : group.sentinels()) {
    sentinels +=
        (sentinels.empty() ? "" : ", ") + std::string("127.0.0.1:") + std::to_string(s.port);
  }
  std::string yaml = "clusters:\n";
  int written = 0;
  for (int c = 0; c < clusters; ++c) {
    char name[16];
    std::snprintf(name, sizeof name, "r%05d", c + 1);
    yaml += std::string("  - name: ") + name +
            "\n    kind: redis\n    ttl: " + std::to_string(10 * o.scale_interval) +
            "s\n    probe_interval: " + std::to_string(o.scale_interval) +
            "s\n    probe_timeout: 800ms\n    redis:\n" +
            "      master_name: " + group.master_name() + "\n      sentinels: [" + sentinels +
            "]\n    members:\n";
    for (int m = 0; m < size && written < o.sentinel_members; ++m, ++written) {
      const auto& member = group.members()[static_cast<size_t>(m)];
      yaml += "      - name: " + member.name +
              "\n        address: 127.0.0.1:" + std::to_string(member.port) + "\n";
    }
  }
  testing::TempDir root("sbd-bench-sentinels-");
  return MeasureBuilds(o, "sentinels", root.path(), yaml, o.sentinel_members, clusters, size);
}

void PrintBuildsTable(const std::string& title, const json& runs, std::ostringstream& t) {
  t << "\n### " << title
    << "\n\n"
       "| build | members | clusters | up before / at end | CPU cores (no scrapes / with) | RSS "
       "MB max | threads | round-start lateness p50 / p99 / max ms | probe ms p50 / p99 | "
       "failures in window | farm req/s |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : runs) {
    t << "| " << r.value("build", "") << " | " << r.value("members", 0) << " | "
      << r.value("clusters", 0) << " | " << Fixed(r.value("members_up_before_windows", -1.0), 0)
      << " / " << Fixed(r.value("members_up_at_end", -1.0), 0) << " | "
      << Fixed(r.value("cpu_cores", -1.0), 3) << " / "
      << Fixed(r.value("cpu_cores_with_scrapes", -1.0), 3) << " | "
      << Fixed(r.value("rss_mb_max", -1.0), 0) << " | " << r.value("threads", 0) << " | "
      << Fixed(r.value("round_jitter_ms_p50", -1.0), 1) << " / "
      << Fixed(r.value("round_jitter_ms_p99", -1.0), 1) << " / "
      << Fixed(r.value("round_jitter_ms_max", -1.0), 1) << " | "
      << Fixed(r.value("probe_latency_ms_p50", -1.0), 1) << " / "
      << Fixed(r.value("probe_latency_ms_p99", -1.0), 1) << " | "
      << Fixed(r.value("probe_failures_in_window", -1.0), 0) << " | "
      << Fixed(r.value("farm_requests_per_s", -1.0), 0) << " |\n";
  }
}

// ---------------------------------------------------------------------------------------------
// Output

// Issue 13: the detector polling only against the detector with its lock-store watch.
void PrintWatchTable(const json& page, std::ostringstream& t) {
  const json& s = page["watch_summary"];
  auto cell = [&](const std::string& variant, const char* row) {
    const json& x = s[variant][row];
    return Fixed(x["median"]) + " (max " + Fixed(x["max"]) + ")" +
           (x["missed"].get<int>() > 0 ? ", missed " + std::to_string(x["missed"].get<int>()) : "");
  };
  t << "1b. Polling only against the lock-store watch, same " << page["trials"].size()
    << " trials, median s (max)\n\n| | polling only | with the watch |\n|---|---|---|\n"
    << "| onset -> confirmed verdict (startsAt), probe interval 1 s | "
    << cell("poll-1s", "verdict_s") << " | " << cell("watch-1s", "verdict_s") << " |\n";
  for (const auto& [row, label] : std::vector<std::pair<const char*, const char*>>{
           {"page_gw0_s", "group_wait 0 s"}, {"page_gw1_s", "group_wait 1 s"}}) {
    t << "| onset -> page at the webhook, probe interval 5 s, " << label << " | "
      << cell("poll-5s", row) << " | " << cell("watch-5s", row) << " |\n";
    t << "| onset -> page at the webhook, probe interval 1 s, " << label << " | "
      << cell("poll-1s", row) << " | " << cell("watch-1s", row) << " |\n";
  }
  const json& tr = page["transitions"];
  t << "| switchovers / failovers: SplitBrainSuspected or SplitBrain alerts over " << tr["count"]
    << " | " << tr["alerts"]["poll-1s"] << " (1 s), " << tr["alerts"]["poll-5s"] << " (5 s) | "
    << tr["alerts"]["watch-1s"] << " (1 s), " << tr["alerts"]["watch-5s"] << " (5 s) |\n\n";
}

void PrintTable(const json& r) {
  std::ostringstream t;
  t << "\nsplitbrain-bench " << r["date"].get<std::string>() << " on "
    << r["machine"]["nproc"].get<int>() << " cores (" << r["machine"]["cpu"].get<std::string>()
    << "), load at start " << r["machine"]["loadavg_start"].get<std::string>() << "\n\n";
  if (r.contains("page")) {
    const auto& s = r["page"]["summary"];
    t << "1. Onset to page, frozen Patroni leader, " << r["page"]["trials"].size()
      << " trials (TTL " << r["page"]["ttl_s"] << " s)\n\n"
      << "| system | median s | max s | paged | missed | median vs detector |\n"
      << "|---|---|---|---|---|---|\n";
    for (const auto& [key, label] : std::vector<std::pair<std::string, std::string>>{
             {"SplitBrain", "detector (1 s probe interval)"},
             {RuleStack::kGitLab, "rule, GitLab: count by (env,type,job) > 1, for 1m"},
             {RuleStack::kCommunity, "rule, community: count != 1, for 0m"}}) {
      const auto& x = s[key];
      t << "| " << label << " | " << Fixed(x["median_s"]) << " | " << Fixed(x["max_s"]) << " | "
        << x["paged"] << " | " << x["missed"] << " | "
        << (x.contains("ratio_to_detector_median")
                ? Fixed(x["ratio_to_detector_median"].get<double>(), 1) + "x"
                : "1x")
        << " |\n";
    }
    t << "\n";
  }
  if (r.contains("page") && r["page"].contains("watch_summary")) PrintWatchTable(r["page"], t);
  if (r.contains("cost")) {
    const auto& c = r["cost"];
    t << "2. Cost, " << c["members"] << " members probed every second for "
      << Fixed(c["window_s"], 0) << " s\n\n"
      << "| system | processes | member-probes | CPU s | CPU s per 1,000 probes | peak RSS MB "
         "(sum) |\n|---|---|---|---|---|---|\n";
    for (const auto& [key, label] : std::vector<std::pair<std::string, std::string>>{
             {"detector", "detector"},
             {"postgres_exporter", "postgres_exporter, one per member, scraped at 1 s"}}) {
      const auto& x = c[key];
      t << "| " << label << " | " << x["processes"] << " | " << Fixed(x["member_probes"], 0)
        << " | " << Fixed(x["cpu_s"]) << " | " << Fixed(x["cpu_s_per_1000_probes"], 3) << " | "
        << Fixed(x["peak_rss_mb"], 1) << " |\n";
    }
    t << "\n";
  }
  if (r.contains("scale")) {
    t << "3. Scale, 1 s probe interval, members through pgbouncer onto 2 PostgreSQL servers\n\n"
      << "| layout | members | up | CPU cores | RSS MB max | threads | round jitter p50 / p99 ms | "
         "probe p50 / "
         "p99 ms | /metrics ms p50 / max | /metrics MB | overruns | failures | load |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& x : r["scale"]) {
      if (x.contains("error")) {
        t << "| " << x["layout"].get<std::string>() << " | " << x["members"]
          << " | failed: " << x["error"].get<std::string>().substr(0, 80) << " |\n";
        continue;
      }
      t << "| " << x["layout"].get<std::string>() << " | " << x["members"] << " | "
        << Fixed(x["members_up_at_end"], 0) << " | " << Fixed(x["cpu_cores"]) << " | "
        << Fixed(x["rss_mb_max"], 1) << " | " << x["threads"] << " | "
        << Fixed(x["round_jitter_ms_p50"], 1) << " / " << Fixed(x["round_jitter_ms_p99"], 1)
        << " | " << Fixed(x["probe_latency_ms_p50"]) << " / " << Fixed(x["probe_latency_ms_p99"])
        << " | " << Fixed(x["metrics_scrape_ms_p50"], 1) << " / "
        << Fixed(x["metrics_scrape_ms_max"], 1) << " | "
        << Fixed(x["metrics_bytes"].get<double>() / 1e6, 2) << " | "
        << Fixed(x["overruns_in_window"], 0) << " | " << Fixed(x["probe_failures_in_window"], 0)
        << " | " << x["loadavg"].get<std::string>().substr(0, 14) << " |\n";
    }
  }
  if (r.contains("redis")) PrintRedisTable(r["redis"], t);
  if (r.contains("hostile")) PrintHostileTable(r["hostile"], t);
  if (r.contains("frozen_rest")) PrintHostileTable(r["frozen_rest"], t);
  if (r.contains("claims")) {
    PrintBuildsTable("Claim members (HTTP metrics endpoints) at scale", r["claims"], t);
  }
  if (r.contains("sentinels")) {
    PrintBuildsTable("Redis members under Sentinel at scale", r["sentinels"], t);
  }
  std::cout << t.str() << std::flush;
}

/// --smoke: the figures exist (not what they are).
bool FiguresProduced(const json& r, std::string* why) {
  auto positive = [&](const json& v, const std::string& what) {
    if (!v.is_number() || v.get<double>() < 0) {
      *why = what + " missing";
      return false;
    }
    return true;
  };
  if (r.contains("cost")) {
    for (const char* k : {"detector", "postgres_exporter"}) {
      if (!positive(r["cost"][k]["cpu_s_per_1000_probes"], std::string("cost ") + k) ||
          !positive(r["cost"][k]["peak_rss_mb"], std::string("cost peak rss ") + k)) {
        return false;
      }
    }
  }
  if (r.contains("scale")) {
    for (const auto& x : r["scale"]) {
      if (x.contains("error")) {
        *why = "scale failed";
        return false;
      }
      for (const char* k : {"cpu_cores", "rss_mb_max", "round_jitter_ms_p99",
                            "probe_latency_ms_p99", "metrics_scrape_ms_p50", "metrics_bytes"}) {
        if (!positive(x[k], std::string("scale ") + k)) return false;
      }
    }
  }
  if (r.contains("page")) {
    if (!positive(r["page"]["summary"]["SplitBrain"]["median_s"], "page detector")) return false;
  }
  if (r.contains("redis")) {
    if (!positive(r["redis"]["summary"]["SplitBrain"]["median_s"], "redis detector")) return false;
  }
  return true;
}

}  // namespace

int Main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  // Thousands of member connections: make sure the fd limit (inherited by the detector and
  // pgbouncer) allows them.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  json r = {{"date", UtcNow()},
            {"smoke", o.smoke},
            {"machine",
             {{"nproc", static_cast<int>(std::thread::hardware_concurrency())},
              {"cpu", CpuModel()},
              {"mem_mb", MemTotalMb()},
              {"loadavg_start", LoadAvg()}}}};
  const auto start = Clock::now();
  try {
    if (o.parts.count("page")) r["page"] = PartPage(o);
    // Parts hostile and frozen-rest (issue 25's first and fourth rows) run the same code.
    auto hostile_options = [&o] {
      HostileOptions hostile;
      hostile.detector = o.detector;
      hostile.old_detector = o.old_detector;
      hostile.etcd_candidate = SBD_ETCD_CANDIDATE;
      hostile.trials = o.trials;
      return hostile;
    };
    if (o.parts.count("hostile")) {
      HostileOptions hostile = hostile_options();
      hostile.black_holed = o.hostile_black_holed;
      hostile.trickling = o.hostile_trickling;
      r["hostile"] = PartHostile(hostile);
    }
    if (o.parts.count("frozen-rest")) {
      // The other clusters are Patroni clusters whose REST never answers, nothing else hostile.
      HostileOptions frozen = hostile_options();
      frozen.black_holed = 0;
      frozen.trickling = 0;
      frozen.healthy = 0;
      frozen.frozen_rest = o.frozen_rest;
      frozen.builds_in_turn = true;
      r["frozen_rest"] = PartHostile(frozen);
    }
    if (o.parts.count("claims")) r["claims"] = PartClaims(o);
    if (o.parts.count("sentinels")) r["sentinels"] = PartSentinels(o);
    if (o.parts.count("redis")) {
      RedisPartOptions redis;
      redis.trials = o.redis_trials;
      redis.detector = o.detector;
      r["redis"] = PartRedis(redis);
    }
    if (o.parts.count("cost") || o.parts.count("scale")) {
      Log("starting a PostgreSQL 15 primary and its streaming replica");
      PgPair pg;
      if (o.parts.count("scale")) r["scale"] = PartScale(o, pg);
      if (o.parts.count("cost")) r["cost"] = PartCost(o, pg);
    }
  } catch (const std::exception& e) {
    std::cerr << "splitbrain-bench: " << e.what() << "\n";
    r["error"] = e.what();
  }
  r["machine"]["loadavg_end"] = LoadAvg();
  r["duration_s"] = Secs(Clock::now() - start);
  std::ofstream(o.json_path) << r.dump(2) << "\n";
  PrintTable(r);
  std::cout << "\nfigures: " << o.json_path << " (" << Fixed(r["duration_s"], 0) << " s)\n";
  if (r.contains("error")) return 1;
  std::string why;
  if (!FiguresProduced(r, &why)) {
    std::cerr << "splitbrain-bench: " << why << "\n";
    return 1;
  }
  return 0;
}

}  // namespace sbd::bench

int main(int argc, char** argv) { return sbd::bench::Main(argc, argv); }
