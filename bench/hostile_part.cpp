#include "bench/hostile_part.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "bench/pg_fleet.h"
#include "bench/slow_http.h"
#include "detector/common/base64.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/election_sandbox.h"
#include "tests/support/patroni_environment.h"
#include "tests/support/process.h"
#include "tests/support/syn_drop.h"

namespace sbd::bench {
namespace {

using nlohmann::json;
using sbd::testing::WaitFor;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr int kMembersPerCluster = 10;

double Secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The frozen-REST clusters' counters in one detector: per member, the PostgreSQL reads that
// succeeded (probes less failures) and the Patroni REST failures; per cluster, its rounds.
struct FrozenCounters {
  std::map<std::string, double> reads;          // cluster/member
  std::map<std::string, double> rest_failures;  // cluster/member
  std::map<std::string, double> rounds;         // cluster
  bool ok = false;
};

struct Variant {
  std::string name;   // also the Patroni cluster's name in its config
  std::string build;  // "new" or "old"
  bool hostile = false;
  int port = 0;
  std::unique_ptr<testing::DetectorProcess> detector;
  // Filled by the sampler (hostile variants): /status samples of the healthy clusters.
  long samples = 0;
  long not_healthy = 0;
  std::vector<std::string> not_healthy_seen;
  int max_threads = 0;
  std::vector<double> pages;
  int missed = 0;
  // The frozen-REST clusters (part frozen-rest): their verdicts in the samples, and their
  // counters when the sampling began.
  std::map<std::string, long> frozen_verdicts;
  FrozenCounters frozen_start;
};

std::string ElectionCluster(const std::string& name, const std::string& etcd,
                            const std::vector<std::string>& urls) {
  std::string yaml = "  - name: " + name +
                     "\n    kind: etcd_election\n    ttl: 10s\n    probe_interval: 1s\n"
                     "    probe_timeout: 800ms\n    etcd_election:\n      endpoints: [" +
                     etcd + "]\n      prefix: /election/" + name +
                     "\n      claim:\n        token_label: token\n    members:\n";
  for (size_t i = 0; i < urls.size(); ++i) {
    yaml += "      - name: m" + std::to_string(i) + "\n        metrics_url: " + urls[i] + "\n";
  }
  return yaml;
}

// The first firing SplitBrain for `cluster` delivered at or after `since`, or nullopt.
std::optional<Clock::time_point> PageAt(const testing::WebhookReceiver& webhook,
                                        const std::string& cluster, Clock::time_point since) {
  for (const auto& d : webhook.Deliveries()) {
    if (d.at < since || !d.body.contains("alerts")) continue;
    for (const auto& a : d.body["alerts"]) {
      if (a["labels"].value("alertname", "") == "SplitBrain" &&
          a["labels"].value("cluster", "") == cluster && a.value("status", "") == "firing") {
        return d.at;
      }
    }
  }
  return std::nullopt;
}

json StatusOf(int port) {
  const TimedGet r = HttpGetTimed(port, "/status", seconds(5));
  if (r.status != 200) return json();
  json status = json::parse(r.body, nullptr, false);
  return status.is_discarded() ? json() : status;
}

// The demo cluster's verdict in a variant, "" when unreadable.
std::string DemoVerdict(const Variant& v) {
  const json status = StatusOf(v.port);
  if (!status.contains("clusters")) return "";
  for (const auto& c : status["clusters"]) {
    if (c.value("name", "") == v.name) return c.value("verdict", "");
  }
  return "";
}

// The first member error of a cluster whose name starts with `prefix`: what bound it broke.
std::string MemberError(const json& status, const std::string& prefix) {
  if (!status.contains("clusters")) return "";
  for (const auto& c : status["clusters"]) {
    if (c.value("name", "").rfind(prefix, 0) != 0) continue;
    for (const auto& m : c["members"]) {
      if (m.contains("error")) return m["error"].value("message", "");
    }
  }
  return "";
}

// Issue 25's fourth row: a Patroni cluster of two members whose agent is frozen. Its scope in
// etcd names m1 the leader, as the agent wrote it before it froze; its REST API (`rest`)
// accepts and never answers; its PostgreSQL answers, through pgbouncer onto a real replica (one
// alias per member, so that their DSNs differ, as real members' do).
std::string FrozenRestCluster(const std::string& name, const testing::EtcdServer& etcd,
                              const Bouncer& bouncer, const std::string& password_file,
                              const std::string& rest) {
  auto put = [&](const std::string& key, const std::string& value) {
    etcd.PostV3("kv/put", json{{"key", Base64Encode("/service/" + name + "/" + key)},
                               {"value", Base64Encode(value)}}
                              .dump());
  };
  put("config", json{{"ttl", 30}}.dump());
  put("leader", "m1");
  std::string yaml = "  - name: " + name + "\n    kind: patroni\n    scope: " + name +
                     "\n    etcd:\n      endpoints: [" + etcd.endpoint() +
                     "]\n    probe_interval: 1s\n    probe_timeout: 800ms\n    members:\n";
  for (const std::string member : {"m1", "m2"}) {
    put("members/" + member, json{{"role", member == "m1" ? "master" : "replica"},
                                  {"state", "running"},
                                  {"api_url", rest + "/patroni"}}
                                 .dump());
    yaml += "      - name: " + member + "\n        dsn: \"" +
            bouncer.Dsn(member == "m1" ? "replica1" : "replica2") +
            "\"\n        password_file: " + password_file + "\n        patroni_url: " + rest + "\n";
  }
  return yaml;
}

FrozenCounters FrozenCountersOf(int port) {
  FrozenCounters out;
  const TimedGet r = HttpGetTimed(port, "/metrics", seconds(10));
  if (r.status != 200) return out;
  out.ok = true;
  auto frozen = [](const Sample& s) {
    return s.labels.count("cluster") && s.labels.at("cluster").rfind("frozen-", 0) == 0;
  };
  auto key = [](const Sample& s) { return s.labels.at("cluster") + "/" + s.labels.at("member"); };
  for (const auto& s : ParseExposition(r.body, "splitbrain_probes_total")) {
    if (frozen(s)) out.reads[key(s)] += s.value;
  }
  for (const auto& s : ParseExposition(r.body, "splitbrain_probe_failures_total")) {
    if (frozen(s)) out.reads[key(s)] -= s.value;
  }
  for (const auto& s : ParseExposition(r.body, "splitbrain_patroni_failures_total")) {
    if (frozen(s)) out.rest_failures[key(s)] += s.value;
  }
  for (const auto& s : ParseExposition(r.body, "splitbrain_rounds_total")) {
    if (frozen(s)) out.rounds[s.labels.at("cluster")] += s.value;
  }
  return out;
}

// Between two readings: how many rounds each frozen cluster ran, and in what share of them
// each member's PostgreSQL was read (the least of any member), and the REST failures.
json FrozenReadsBetween(const FrozenCounters& a, const FrozenCounters& b, int clusters) {
  if (!a.ok || !b.ok) return {{"error", "/metrics unreadable"}};
  double min_share = 1e300, min_rounds = 1e300, rest_failures = 0;
  long members = 0, below = 0;
  std::string worst;
  for (const auto& [member, reads] : b.reads) {
    const std::string cluster = member.substr(0, member.find('/'));
    const double rounds = b.rounds.count(cluster) && a.rounds.count(cluster)
                              ? b.rounds.at(cluster) - a.rounds.at(cluster)
                              : 0;
    const double read = reads - (a.reads.count(member) ? a.reads.at(member) : 0);
    const double share = rounds > 0 ? read / rounds : 0;
    ++members;
    if (share < 0.95) ++below;
    if (share < min_share) {
      min_share = share;
      worst = member;
    }
    min_rounds = std::min(min_rounds, rounds);
  }
  for (const auto& [member, failures] : b.rest_failures) {
    rest_failures += failures - (a.rest_failures.count(member) ? a.rest_failures.at(member) : 0);
  }
  return {{"clusters", clusters},
          {"members_seen", members},
          {"rounds_min", members ? min_rounds : -1},
          {"read_share_min", members ? min_share : -1},
          {"read_share_min_member", worst},
          {"members_read_below_95pct", below},
          {"rest_failures", rest_failures}};
}

}  // namespace

json PartHostile(const HostileOptions& o) {
  Log("hostile: starting etcd, 3-member Patroni, Alertmanager and the quiet detector");
  testing::Environment env(o.detector);
  testing::SynDropListener black_hole;
  SlowHttpServer trickler(SlowHttpServer::Mode::kTrickleHeaders);
  Log("hostile: starting " + std::to_string(2 * o.healthy) + " etcd candidates");
  std::vector<std::unique_ptr<testing::EtcdCandidate>> candidates;
  std::string healthy_yaml;
  for (int i = 0; i < o.healthy; ++i) {
    const std::string name = "healthy-" + std::to_string(i);
    std::vector<std::string> urls;
    for (const char* who : {"a", "b"}) {
      testing::EtcdCandidate::Options c;
      c.endpoint = env.etcd->endpoint();
      c.prefix = "/election/" + name;
      c.lock = name;
      c.value = name + "-" + who;
      c.ttl_s = 10;
      candidates.push_back(
          std::make_unique<testing::EtcdCandidate>(o.etcd_candidate, c, env.root.path()));
      urls.push_back(candidates.back()->metrics_url() + "/metrics");
    }
    healthy_yaml += ElectionCluster(name, env.etcd->endpoint(), urls);
  }
  std::string hostile_yaml;
  auto add_hostile = [&](const std::string& prefix, int members, int port) {
    for (int c = 0; c * kMembersPerCluster < members; ++c) {
      std::vector<std::string> urls;
      for (int m = 0; m < kMembersPerCluster && c * kMembersPerCluster + m < members; ++m) {
        urls.push_back("http://127.0.0.1:" + std::to_string(port) + "/m" +
                       std::to_string(c * kMembersPerCluster + m));
      }
      hostile_yaml += ElectionCluster(prefix + std::to_string(c), env.etcd->endpoint(), urls);
    }
  };
  add_hostile("blackholed-", o.black_holed, black_hole.port());
  add_hostile("trickling-", o.trickling, trickler.port());
  SlowHttpServer silent(SlowHttpServer::Mode::kSilent);
  std::unique_ptr<PgPair> pg;
  std::unique_ptr<Bouncer> bouncer;
  // Their scopes live in an etcd of their own: what is measured is the hung REST APIs beside
  // the demo cluster, not the demo's etcd answering 600 more requests a second.
  std::unique_ptr<testing::EtcdServer> frozen_etcd;
  if (o.frozen_rest > 0) {
    frozen_etcd = std::make_unique<testing::EtcdServer>(env.root.path() + "/etcd-frozen");
    Log("hostile: starting PostgreSQL, its replica and pgbouncer for " +
        std::to_string(o.frozen_rest) + " Patroni clusters whose REST never answers");
    pg = std::make_unique<PgPair>();
    bouncer =
        std::make_unique<Bouncer>(pg->sandbox.root() + "/pgbouncer",
                                  std::map<std::string, int>{{"replica1", pg->replica->port()},
                                                             {"replica2", pg->replica->port()}},
                                  "md5");
    const std::string rest = "http://127.0.0.1:" + std::to_string(silent.port());
    for (int c = 0; c < o.frozen_rest; ++c) {
      char name[32];
      std::snprintf(name, sizeof name, "frozen-%03d", c);
      hostile_yaml +=
          FrozenRestCluster(name, *frozen_etcd, *bouncer, pg->sandbox.PasswordFile(), rest);
    }
  }

  json trials = json::array();
  json variants_out = json::array();
  // One phase: these builds' detectors, each quiet and hostile, through every trial; their
  // figures are added to `trials` and `variants_out`, and the detectors stop at its end.
  auto run_phase = [&](const std::vector<std::string>& builds) {
    std::vector<Variant> variants;
    auto add_variant = [&](const std::string& build, bool hostile) {
      Variant v;
      v.build = build;
      v.hostile = hostile;
      v.name = "demo-" + build + (hostile ? "-hostile" : "-quiet");
      std::string yaml = env.Header();
      const auto at = yaml.find("  - name: demo\n");
      if (at == std::string::npos) throw std::runtime_error("hostile: no demo cluster in config");
      yaml.replace(at, 15, "  - name: " + v.name + "\n");
      yaml += "    members:\n";
      for (const auto& m : env.cluster->members()) {
        yaml += testing::MemberYaml(m, env.cluster->PasswordFile());
      }
      if (hostile) yaml += healthy_yaml + hostile_yaml;
      const std::string file = testing::WriteFile(env.root.path(), v.name + ".yml", yaml);
      v.port = testing::FreeLoopbackPort();
      v.detector = std::make_unique<testing::DetectorProcess>(
          build == "new" ? o.detector : o.old_detector,
          std::vector<std::string>{"--config.file=" + file,
                                   "--web.listen-address=127.0.0.1:" + std::to_string(v.port)},
          env.root.path() + "/" + v.name + ".log");
      variants.push_back(std::move(v));
    };
    for (const std::string& build : builds) {
      add_variant(build, false);
      add_variant(build, true);
    }
    for (const auto& v : variants) {
      if (!WaitFor([&] { return testing::HttpGet(v.port, "/-/ready") == "Ready\n"; },
                   seconds(60))) {
        throw std::runtime_error("hostile: detector " + v.name + " not ready:\n" +
                                 v.detector->Log());
      }
    }
    auto quiet = [&] {
      for (const auto& v : variants) {
        if (DemoVerdict(v) != "healthy") return false;
      }
      return true;
    };
    Log("hostile: waiting for every detector's Patroni cluster to read healthy");
    env.cluster->WaitHealthy(seconds(120));
    if (!WaitFor(quiet, seconds(120), milliseconds(500))) {
      throw std::runtime_error("hostile: the detectors never all read healthy");
    }
    for (auto& v : variants) {
      if (v.hostile && o.frozen_rest > 0) v.frozen_start = FrozenCountersOf(v.port);
    }
    // The healthy elections, sampled in each hostile detector from here to the end.
    std::mutex mu;
    std::atomic<bool> stop{false};
    std::thread sampler([&] {
      while (!stop) {
        for (auto& v : variants) {
          if (!v.hostile) continue;
          const json status = StatusOf(v.port);
          const ProcUsage usage = ReadProcUsage(v.detector->pid());
          std::lock_guard<std::mutex> lock(mu);
          v.max_threads = std::max(v.max_threads, usage.threads);
          if (!status.contains("clusters")) {
            ++v.samples;
            ++v.not_healthy;
            if (v.not_healthy_seen.size() < 3) v.not_healthy_seen.push_back("/status unreadable");
            continue;
          }
          for (const auto& c : status["clusters"]) {
            if (c.value("name", "").rfind("frozen-", 0) == 0)
              ++v.frozen_verdicts[c.value("verdict", "")];
            if (c.value("name", "").rfind("healthy-", 0) != 0) continue;
            ++v.samples;
            if (c.value("verdict", "") == "healthy") continue;
            ++v.not_healthy;
            if (v.not_healthy_seen.size() < 3) {
              v.not_healthy_seen.push_back(c.value("name", "") + ": " + c.value("summary", ""));
            }
          }
        }
        WaitFor([&] { return stop.load(); }, milliseconds(500), milliseconds(50));
      }
    });
    // Joined on every way out of the phase: a trial that throws must not leave it joinable.
    struct JoinAtExit {
      std::atomic<bool>& stop;
      std::thread& thread;
      ~JoinAtExit() {
        stop = true;
        if (thread.joinable()) thread.join();
      }
    } join_sampler{stop, sampler};
    for (int t = 1; t <= o.trials; ++t) {
      env.cluster->WaitHealthy(seconds(120));
      if (!WaitFor(quiet, seconds(240), milliseconds(500))) {
        stop = true;
        sampler.join();
        throw std::runtime_error("hostile: not healthy before trial " + std::to_string(t));
      }
      const std::string leader = env.cluster->Leader();
      testing::WritablePoller poller(env.cluster->members());
      const auto freeze = Clock::now();
      env.cluster->FreezePatroni(leader);
      Log("hostile: trial " + std::to_string(t) + ": froze the Patroni of " + leader);
      if (!WaitFor([&] { return poller.SecondWritableAt().has_value(); },
                   seconds(3 * testing::kSandboxTtlSeconds))) {
        env.cluster->ThawPatroni(leader);
        throw std::runtime_error("hostile: no second writable member after the freeze");
      }
      const auto onset = *poller.SecondWritableAt();
      WaitFor(
          [&] {
            for (const auto& v : variants) {
              if (!PageAt(*env.webhook, v.name, freeze)) return false;
            }
            return true;
          },
          seconds(60), milliseconds(100));
      json trial = {{"trial", t}, {"frozen_leader", leader}, {"loadavg", LoadAvg()}};
      for (const auto& v : variants) trial["builds"].push_back(v.build);
      for (auto& v : variants) {
        const auto at = PageAt(*env.webhook, v.name, freeze);
        if (at) {
          v.pages.push_back(Secs(*at - onset));
          trial[v.name] = Secs(*at - onset);
        } else {
          ++v.missed;
          trial[v.name] = nullptr;
        }
      }
      Log("hostile: trial " + std::to_string(t) + ": " + trial.dump());
      trials.push_back(trial);
      env.cluster->ThawPatroni(leader);
      env.cluster->Heal();
    }
    stop = true;
    sampler.join();
    for (const auto& v : variants) {
      const json status = v.hostile ? StatusOf(v.port) : json();
      variants_out.push_back(
          {{"name", v.name},
           {"build", v.build},
           {"hostile", v.hostile},
           {"median_s", Median(v.pages)},
           {"max_s", Max(v.pages)},
           {"pages", v.pages},
           {"missed", v.missed},
           {"healthy_samples", v.samples},
           {"healthy_samples_not_healthy", v.not_healthy},
           {"not_healthy_seen", v.not_healthy_seen},
           {"max_threads", v.max_threads},
           {"black_holed_error", MemberError(status, "blackholed-")},
           {"trickling_error", MemberError(status, "trickling-")},
           {"frozen_rest_verdicts", v.frozen_verdicts},
           {"frozen_rest_reads",
            v.hostile && o.frozen_rest > 0
                ? FrozenReadsBetween(v.frozen_start, FrozenCountersOf(v.port), o.frozen_rest)
                : json()}});
    }
  };
  std::vector<std::string> builds = {"new"};
  if (!o.old_detector.empty()) builds.push_back("old");
  if (o.builds_in_turn) {
    for (const std::string& build : builds) run_phase({build});
  } else {
    run_phase(builds);
  }
  json out = {{"trials", trials},
              {"builds_in_turn", o.builds_in_turn},
              {"black_holed", o.black_holed},
              {"trickling", o.trickling},
              {"healthy_clusters", o.healthy},
              {"trickler_connections", trickler.accepted()},
              {"frozen_rest", o.frozen_rest},
              {"frozen_rest_connections", silent.accepted()},
              {"variants", variants_out}};
  return out;
}

void PrintHostileTable(const json& r, std::ostream& t) {
  const bool frozen = r.value("frozen_rest", 0) > 0;
  if (frozen) {
    t << "Patroni clusters whose REST never answers beside a frozen Patroni leader: "
      << r["frozen_rest"] << " clusters of two members (PostgreSQL through pgbouncer), "
      << r["trials"].size() / std::max<size_t>(1, r["variants"].size() / 2)
      << " trials per build, each build's detectors alone\n\n"
      << "| detector | onset -> page median (max) | vs quiet, same build | threads (max) | "
         "their rounds in the window (least) | least share of rounds a member's PostgreSQL "
         "was read | members read in under 95% of rounds | REST failures | their verdicts |\n"
         "|---|---|---|---|---|---|---|---|---|\n";
  } else {
    t << "Hostile endpoints beside a frozen Patroni leader: " << r["black_holed"]
      << " black-holed and " << r["trickling"] << " trickling claim members in other clusters, "
      << r["healthy_clusters"] << " healthy elections, " << r["trials"].size() << " trials\n\n"
      << "| detector | onset -> page median (max) | vs quiet, same build | healthy elections' "
         "samples not healthy | threads (max) | a black-holed member's error | a trickling "
         "member's error |\n|---|---|---|---|---|---|---|\n";
  }
  std::map<std::string, double> quiet;
  for (const auto& v : r["variants"]) {
    if (!v["hostile"].get<bool>()) quiet[v["build"]] = v["median_s"].get<double>();
  }
  for (const auto& v : r["variants"]) {
    const double median = v["median_s"].get<double>();
    const bool hostile = v["hostile"].get<bool>();
    const double base = quiet.count(v["build"]) ? quiet[v["build"]] : -1;
    t << "| " << v["name"].get<std::string>() << " | " << Fixed(median) << " s ("
      << Fixed(v["max_s"].get<double>()) << ")"
      << (v["missed"].get<int>() > 0 ? ", " + std::to_string(v["missed"].get<int>()) + " missed"
                                     : "")
      << " | " << (hostile && base > 0 ? Fixed(median / base) + "x" : "-") << " | ";
    if (frozen) {
      t << (hostile ? std::to_string(v["max_threads"].get<int>()) : "-") << " | ";
      const json& reads = v["frozen_rest_reads"];
      if (!hostile || reads.is_null()) {
        t << "- | - | - | - | - |\n";
      } else if (reads.contains("error")) {
        t << reads["error"].get<std::string>() << " | | | | |\n";
      } else {
        std::string verdicts;
        for (const auto& [verdict, n] : v["frozen_rest_verdicts"].items()) {
          verdicts +=
              (verdicts.empty() ? "" : ", ") + verdict + " " + std::to_string(n.get<long>());
        }
        t << Fixed(reads["rounds_min"].get<double>(), 0) << " | "
          << Fixed(reads["read_share_min"].get<double>()) << " ("
          << reads["read_share_min_member"].get<std::string>() << ") | "
          << reads["members_read_below_95pct"] << " of " << reads["members_seen"] << " | "
          << Fixed(reads["rest_failures"].get<double>(), 0) << " | " << verdicts << " |\n";
      }
      continue;
    }
    t << (hostile ? std::to_string(v["healthy_samples_not_healthy"].get<long>()) + " of " +
                        std::to_string(v["healthy_samples"].get<long>())
                  : "-")
      << " | " << (hostile ? std::to_string(v["max_threads"].get<int>()) : "-") << " | "
      << v["black_holed_error"].get<std::string>() << " | "
      << v["trickling_error"].get<std::string>() << " |\n";
  }
  for (const auto& v : r["variants"]) {
    for (const auto& seen : v["not_healthy_seen"]) {
      t << "- " << v["name"].get<std::string>() << ", not healthy: " << seen.get<std::string>()
        << "\n";
    }
  }
}

}  // namespace sbd::bench
