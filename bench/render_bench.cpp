// splitbrain-render-bench: what a /metrics scrape and a /status read cost at a fleet's size,
// without servers. A real Scheduler runs N three-member PostgreSQL clusters on in-process
// fake member probes (the engine's seam) until every cluster has rounds behind it, then
// times, in turn: the scheduler's snapshot, the /metrics render through DetectorCollector
// (the exporter's path), and the resident memory of the process. Prints one line per figure.
//
//   splitbrain-render-bench [--members=N] [--scrapes=N] [--shared-lineage]
//   SBD_DUMP=FILE writes the last /metrics body to FILE, to see what a scrape holds.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "detector/config/config.h"
#include "detector/engine/scheduler.h"
#include "detector/output/metrics.h"
#include "prometheus/text_serializer.h"
#include "spdlog/spdlog.h"

namespace sbd {
namespace {

using Clock = std::chrono::steady_clock;

// Answers at once: member 0 of each cluster as its primary, the others as replicas, all of
// the cluster's lineage.
class InstantProbe : public MemberProbe {
 public:
  InstantProbe(std::string name, std::string lineage, bool primary)
      : name_(std::move(name)), lineage_(std::move(lineage)), primary_(primary) {}
  Observation Probe(SteadyClock::time_point, StartGate* gate) override {
    if (gate) gate->Arrive();
    Observation obs;
    obs.member = name_;
    obs.window.sent_wall = WallClock::now();
    obs.window.sent = SteadyClock::now();
    obs.window.received = obs.window.sent;
    PostgresReading r;
    r.in_recovery = !primary_;
    r.read_only = false;
    r.system_identifier = lineage_;
    r.timeline = 1;
    r.backend_pid = 100;
    r.postmaster_start = "2026-11-30T00:00:00Z";
    r.server_version = 150000;
    r.wal_bytes = 123456789;
    obs.result = r;
    return obs;
  }

 private:
  std::string name_;
  std::string lineage_;
  bool primary_;
};

std::string FleetYaml(int members) {
  std::ostringstream out;
  out << "clusters:\n";
  const int clusters = (members + 2) / 3;
  for (int c = 0; c < clusters; ++c) {
    out << "  - name: cluster-" << c << "\n    ttl: 10s\n    probe_interval: 1s\n"
        << "    probe_timeout: 800ms\n    members:\n";
    for (int m = 0; m < 3; ++m) {
      out << "      - name: c" << c << "-m" << m
          << "\n        dsn: \"host=10.0.0.1 port=5432 user=detector dbname=postgres\"\n";
    }
  }
  return out.str();
}

long RssKb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

// Cluster "cluster-N"'s lineage: its own (N), or one for the whole fleet (a fleet cloned
// from one base backup).
std::string LineageOf(const std::string& cluster, bool shared) {
  return shared ? "7000000000000000001" : "70000000" + cluster.substr(cluster.find('-') + 1);
}

int Run(int members, int scrapes, bool shared_lineage) {
  spdlog::set_level(spdlog::level::err);
  ConfigResult parsed = ParseConfig(FleetYaml(members), "render-bench.yml");
  if (auto* errors = std::get_if<std::vector<ConfigError>>(&parsed)) {
    std::cerr << errors->front().ToString() << "\n";
    return 1;
  }
  const ValidatedConfig config = std::get<ValidatedConfig>(std::move(parsed));
  ProbeFactories factories;
  factories.members = [shared_lineage](const ClusterSpec& cluster, const MemberSpec& member) {
    const bool primary =
        member.name.size() > 3 && member.name.compare(member.name.size() - 3, 3, "-m0") == 0;
    return std::make_unique<InstantProbe>(member.name, LineageOf(cluster.name, shared_lineage),
                                          primary);
  };
  factories.lock_stores = [](const ClusterSpec&) { return nullptr; };
  factories.managers = [](const ClusterSpec&, const MemberSpec&) { return nullptr; };
  Scheduler scheduler(config, factories);
  const long rss_before = RssKb();
  scheduler.Start();
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!scheduler.AllClustersHaveRun() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!scheduler.AllClustersHaveRun()) {
    std::cerr << "not every cluster ran a round within 60 s\n";
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));  // a few rounds of history each
  const long rss_running = RssKb();
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  const auto idle_start = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(5));  // rounds only, no scrape
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  const double idle_cpu = (after.ru_utime.tv_sec - before.ru_utime.tv_sec + after.ru_stime.tv_sec -
                           before.ru_stime.tv_sec) +
                          (after.ru_utime.tv_usec - before.ru_utime.tv_usec +
                           after.ru_stime.tv_usec - before.ru_stime.tv_usec) /
                              1e6;
  const double idle_seconds = std::chrono::duration<double>(Clock::now() - idle_start).count();
  ConfigReloadStatus reload;
  DetectorCollector collector([&scheduler] { return scheduler.Snapshot(); }, &reload);
  std::vector<double> snapshot_ms, render_ms, collect_ms, serialize_ms;
  size_t bytes = 0;
  for (int i = 0; i < scrapes; ++i) {
    const auto t0 = Clock::now();
    const auto snapshot = scheduler.Snapshot();
    const auto t1 = Clock::now();
    const std::string body = RenderMetrics(collector);
    const auto t2 = Clock::now();
    // The render's two halves: building the families (snapshot included) and serialising them.
    const auto families = collector.Collect();
    const auto t3 = Clock::now();
    const std::string again = prometheus::TextSerializer().Serialize(families);
    const auto t4 = Clock::now();
    snapshot_ms.push_back(Ms(t1 - t0));
    render_ms.push_back(Ms(t2 - t1));
    collect_ms.push_back(Ms(t3 - t2));
    serialize_ms.push_back(Ms(t4 - t3));
    bytes = body.size();
    if (std::getenv("SBD_DUMP")) std::ofstream(std::getenv("SBD_DUMP")) << body;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("members %d clusters %zu, lineage %s\n", members, config.clusters().size(),
              shared_lineage ? "shared by every cluster" : "one per cluster");
  std::printf("rounds alone (fake probes answer at once): %.3f cores over %.1f s\n",
              idle_cpu / idle_seconds, idle_seconds);
  std::printf("snapshot ms p50 %.1f max %.1f\n", Percentile(snapshot_ms, 0.5),
              Percentile(snapshot_ms, 1.0));
  std::printf("/metrics render ms p50 %.1f max %.1f (%zu bytes; includes its own snapshot)\n",
              Percentile(render_ms, 0.5), Percentile(render_ms, 1.0), bytes);
  std::printf("  of which families ms p50 %.1f, text serialisation ms p50 %.1f\n",
              Percentile(collect_ms, 0.5), Percentile(serialize_ms, 0.5));
  std::printf("RSS MB before start %.1f, running %.1f, after %d scrapes %.1f, max %.1f\n",
              rss_before / 1024.0, rss_running / 1024.0, scrapes, RssKb() / 1024.0,
              usage.ru_maxrss / 1024.0);
  scheduler.Stop();
  return 0;
}

}  // namespace
}  // namespace sbd

int main(int argc, char** argv) {
  int members = 10000;
  int scrapes = 10;
  bool shared_lineage = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--members=", 0) == 0) {
      members = std::atoi(arg.c_str() + 10);
    } else if (arg.rfind("--scrapes=", 0) == 0) {
      scrapes = std::atoi(arg.c_str() + 10);
    } else if (arg == "--shared-lineage") {
      shared_lineage = true;
    } else {
      std::cerr << "usage: splitbrain-render-bench [--members=N] [--scrapes=N] "
                   "[--shared-lineage]\n";
      return 2;
    }
  }
  if (members < 1 || scrapes < 1) {
    std::cerr << "--members and --scrapes must be at least 1\n";
    return 2;
  }
  return sbd::Run(members, scrapes, shared_lineage);
}
