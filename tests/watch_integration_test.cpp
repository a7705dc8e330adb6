// Lock-store watches on real servers: the etcd watch alone on etcd 3.4 (changes, a restart
// counted and re-established), then end to end on a Patroni 3.0 cluster with the detector at
// a 5 s probe interval: a switchover pages nobody, and a frozen leader's double primary pages
// through Alertmanager (group_wait 0 s) within 1 s of the promotion, not at the next 5 s
// round. The Patroni scenarios share one environment (built by whichever runs first); each
// settles it first and counts only what it caused, so any one passes alone or in any order.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "detector/common/base64.h"
#include "probes/etcd.h"
#include "probes/etcd_watch.h"
#include "probes/sentinel.h"
#include "probes/sentinel_watch.h"
#include "tests/support/hostile_http.h"
#include "tests/support/patroni_environment.h"
#include "tests/support/redis_sandbox.h"

namespace sbd::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

void Put(EtcdServer& etcd, const std::string& key, const std::string& value) {
  etcd.PostV3("kv/put",
              nlohmann::json{{"key", Base64Encode(key)}, {"value", Base64Encode(value)}}.dump());
}

size_t ThreadsOfThisProcess() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    ++count;
  }
  return count;
}

// The shared Patroni environment, with its detector restarted at a 5 s probe interval and an
// Alertmanager that delivers at once (group_wait 0 s), so that the page times the detector.
std::unique_ptr<Environment> WatchEnvironment(PatroniDcs dcs, int members) {
  auto env = std::make_unique<Environment>(SBD_BINARY, dcs, members);
  env->detector.reset();
  env->alertmanager = std::make_unique<AlertmanagerServer>(env->root.path() + "/am0",
                                                           env->webhook->url(), "0s", "1s");
  std::string yaml = env->Header();
  const auto at = yaml.find("probe_interval: 1s");
  // The interval is never above a third of the ttl: Patroni's 10 s would hold it at 1 s.
  yaml.replace(at, std::string("probe_interval: 1s").size(), "probe_interval: 5s\n    ttl: 15s");
  yaml += "    members:\n";
  for (const auto& m : env->cluster->members()) {
    yaml += MemberYaml(m, env->cluster->PasswordFile());
  }
  WriteFile(env->root.path(), "detector.yml", yaml);
  env->detector = std::make_unique<DetectorProcess>(
      SBD_BINARY,
      std::vector<std::string>{"--config.file=" + env->config_file,
                               "--web.listen-address=127.0.0.1:" + std::to_string(env->port)},
      env->root.path() + "/detector-watch.log");
  const bool ready =
      WaitFor([&] { return HttpGet(env->port, "/-/ready") == "Ready\n"; }, seconds(20));
  if (!ready || !WaitFor([&] { return env->Verdict() == "healthy"; }, seconds(30))) {
    throw std::runtime_error("detector not healthy:\n" + env->detector->Log());
  }
  return env;
}

Environment& Env() {
  static std::unique_ptr<Environment> env;
  if (!env) {
    env = WatchEnvironment(PatroniDcs::kEtcd, 3);
    // Torn down at exit before the statics its construction first used (cpp-httplib's
    // response-line parser keeps a function-local std::regex): a static unique_ptr alone
    // was destroyed after them, and the etcd call in its teardown then read a destroyed
    // regex (a 48 GB allocation, the suite OOM-killed after passing).
    std::atexit([] { env.reset(); });
  }
  return *env;
}

// The same on ZooKeeper (Patroni's zookeeper: DCS), two members; built on first use.
Environment& ZooKeeperEnv() {
  static std::unique_ptr<Environment> env;
  if (!env) {
    env = WatchEnvironment(PatroniDcs::kZooKeeper, 2);
    // Torn down at exit before the statics its construction first used (cpp-httplib's
    // response-line parser keeps a function-local std::regex): a static unique_ptr alone
    // was destroyed after them, and the etcd call in its teardown then read a destroyed
    // regex (a 48 GB allocation, the suite OOM-killed after passing).
    std::atexit([] { env.reset(); });
  }
  return *env;
}

}  // namespace

TEST_CASE("etcd watch: reports each holder change, and survives an etcd restart, counted",
          "[watch]") {
  ScopedTempDir dir("sbd-watch-it-");
  EtcdServer etcd(dir.path() + "/etcd");
  std::atomic<int> changes{0};
  EtcdScopeProbe store({etcd.endpoint()}, "/service", "w");
  auto watch = store.Watch([&] { ++changes; });
  REQUIRE(watch);
  REQUIRE(WaitFor([&] { return watch->Status().up; }, seconds(10)));
  Put(etcd, "/service/w/leader", "node1");
  CHECK(WaitFor([&] { return changes == 1; }, seconds(5)));
  // A rewrite of the same holder is no change; the next holder is, and so is a delete.
  Put(etcd, "/service/w/leader", "node1");
  Put(etcd, "/service/w/leader", "node2");
  CHECK(WaitFor([&] { return changes == 2; }, seconds(5)));
  Put(etcd, "/service/w/other", "x");  // another key of the scope: not watched
  etcd.PostV3("kv/deleterange", nlohmann::json{{"key", Base64Encode("/service/w/leader")}}.dump());
  CHECK(WaitFor([&] { return changes == 3; }, seconds(5)));
  CHECK(watch->Status().changes == 3);

  etcd.Stop();
  CHECK(WaitFor([&] { return !watch->Status().up; }, seconds(10)));
  CHECK(watch->Status().breaks == 1);
  etcd.Start();
  REQUIRE(WaitFor([&] { return watch->Status().up; }, seconds(15)));
  Put(etcd, "/service/w/leader", "node3");
  CHECK(WaitFor([&] { return changes == 4; }, seconds(5)));
  CHECK(watch->Status().breaks == 1);
}

TEST_CASE("etcd watch: forty watched clusters each wake on their key, on no thread of their own",
          "[watch][etcd]") {
  ScopedTempDir dir("sbd-watch-many-");
  EtcdServer etcd(dir.path() + "/etcd");
  // One watch first, so that the event loop (and anything else started once) is running.
  EtcdKeyWatch first({etcd.endpoint()}, "/service/first/leader", [] {});
  REQUIRE(WaitFor([&] { return first.Status().up; }, seconds(10)));
  const size_t before = ThreadsOfThisProcess();
  constexpr int kClusters = 40;
  std::vector<std::atomic<int>> wakes(kClusters);
  std::vector<std::unique_ptr<EtcdKeyWatch>> watches;
  for (int i = 0; i < kClusters; ++i) {
    watches.push_back(std::make_unique<EtcdKeyWatch>(std::vector<std::string>{etcd.endpoint()},
                                                     "/service/c" + std::to_string(i) + "/leader",
                                                     [&wakes, i] { ++wakes[i]; }));
  }
  const auto all_up = [&] {
    return std::all_of(watches.begin(), watches.end(),
                       [](const auto& watch) { return watch->Status().up; });
  };
  REQUIRE(WaitFor(all_up, seconds(20)));
  CHECK(ThreadsOfThisProcess() == before);
  for (int i = 0; i < kClusters; i += 2)
    Put(etcd, "/service/c" + std::to_string(i) + "/leader", "n");
  // Each changed key wakes its own cluster, and only it.
  CHECK(WaitFor(
      [&] {
        for (int i = 0; i < kClusters; i += 2) {
          if (wakes[i] != 1) return false;
        }
        return true;
      },
      seconds(10)));
  for (int i = 1; i < kClusters; i += 2) CHECK(wakes[i] == 0);
  CHECK(ThreadsOfThisProcess() == before);
  watches.clear();
  CHECK(ThreadsOfThisProcess() == before);
}

TEST_CASE(
    "etcd watch: a trickled header, an endless message or a non-etcd answer fails its watch "
    "with the bound, and a real etcd's watch beside it keeps working",
    "[watch][etcd][hostile]") {
  HostileHttp trickle(Hostility::kTrickleHeader);
  HostileHttp endless(Hostility::kHugeBody);
  HostileHttp not_etcd(Hostility::kNormal, 1, "<html>hello</html>\n");
  ScopedTempDir dir("sbd-watch-hostile-");
  EtcdServer etcd(dir.path() + "/etcd");
  std::atomic<int> hostile_wakes{0};
  std::atomic<int> wakes{0};
  EtcdKeyWatch trickled({trickle.url()}, "/service/h/leader", [&] { ++hostile_wakes; });
  EtcdKeyWatch endless_line({endless.url()}, "/service/h/leader", [&] { ++hostile_wakes; });
  EtcdKeyWatch wrong({not_etcd.url()}, "/service/h/leader", [&] { ++hostile_wakes; });
  EtcdKeyWatch real({etcd.endpoint()}, "/service/r/leader", [&] { ++wakes; });
  const auto failed_with = [](const EtcdKeyWatch& watch, const std::string& words) {
    const bool seen =
        WaitFor([&] { return watch.LastFailure().find(words) != std::string::npos; }, seconds(10));
    if (!seen) std::cerr << "last failure: " << watch.LastFailure() << "\n";
    return seen;
  };
  CHECK(failed_with(trickled, "no status and headers within the deadline of 2000 ms"));
  CHECK(failed_with(endless_line, "a watch message longer than 1048576 bytes"));
  CHECK(failed_with(wrong, "POST /v3/watch: a watch message that is not JSON"));
  CHECK_FALSE(trickled.Status().up);
  CHECK_FALSE(endless_line.Status().up);
  CHECK_FALSE(wrong.Status().up);
  // Never established, so never counted as a break; tried again with backoff.
  CHECK(WaitFor([&] { return endless.accepted() >= 2; }, seconds(10)));
  CHECK(endless_line.Status().breaks == 0);

  REQUIRE(WaitFor([&] { return real.Status().up; }, seconds(10)));
  const auto put = Clock::now();
  Put(etcd, "/service/r/leader", "node1");
  CHECK(WaitFor([&] { return wakes == 1; }, seconds(5)));
  CHECK(Clock::now() - put < seconds(2));
  CHECK(real.Status().breaks == 0);
  CHECK(real.LastFailure().empty());
  CHECK(hostile_wakes == 0);
}

TEST_CASE("sentinel watch: a master going down is reported, and a lost sentinel counted",
          "[watch][sentinel]") {
  RedisSandbox sandbox;
  RedisProcess& master = sandbox.StartServer("m");
  sandbox.StartServer("r1", &master);
  sandbox.StartSentinels("cache", master, 3, milliseconds(1000), seconds(10));
  std::vector<std::string> sentinels;
  for (const auto& s : sandbox.sentinels()) sentinels.push_back(s->address());
  std::atomic<int> changes{0};
  SentinelStore store(sentinels, "cache", {});
  auto watch = store.Watch([&] { ++changes; });
  REQUIRE(watch);
  REQUIRE(WaitFor([&] { return watch->Status().up; }, seconds(10)));
  CHECK(changes == 0);
  // Frozen, the master is subjectively down for each sentinel after down-after (1 s).
  master.Freeze();
  CHECK(WaitFor([&] { return changes >= 1; }, seconds(10)));
  master.Resume();
  sandbox.sentinels()[0]->Stop();
  CHECK(WaitFor([&] { return watch->Status().breaks == 1; }, seconds(10)));
  CHECK(watch->Status().up);  // the other two still stand
  CHECK(watch->Status().changes >= 1);
}

TEST_CASE("sentinel watch: only events of the watched master count", "[watch][sentinel]") {
  CHECK(SentinelEventConcerns("+switch-master", "cache 127.0.0.1 1 127.0.0.1 2", "cache"));
  CHECK_FALSE(SentinelEventConcerns("+switch-master", "cache2 127.0.0.1 1 127.0.0.1 2", "cache"));
  CHECK(SentinelEventConcerns("+sdown", "master cache 127.0.0.1 6379", "cache"));
  CHECK(SentinelEventConcerns("+odown", "master cache 127.0.0.1 6379 #quorum 2/2", "cache"));
  CHECK(SentinelEventConcerns("+sdown", "slave 127.0.0.1:7 127.0.0.1 7 @ cache 127.0.0.1 6",
                              "cache"));
  CHECK_FALSE(
      SentinelEventConcerns("+sdown", "sentinel x 127.0.0.1 9 @ other 127.0.0.1 6", "cache"));
  CHECK_FALSE(SentinelEventConcerns("+sdown", "", "cache"));
  CHECK_FALSE(SentinelEventConcerns("+sdown", "@", "cache"));
  CHECK_FALSE(SentinelEventConcerns("+tilt", "master cache", "cache"));
}

TEST_CASE("watch: a switchover at a 5 s probe interval pages nobody", "[watch][patroni]") {
  Environment& env = Env();
  const auto start = env.Settle();
  REQUIRE(env.Status()["probe_interval_seconds"] == 5);
  const double before =
      MetricValue(env.Metrics(), "splitbrain_follow_up_rounds_total{cluster=\"demo\"}");
  const std::string new_leader = env.cluster->Switchover();
  // The watch sees the key move: rounds follow it long before the next 5 s round.
  CHECK(WaitFor(
      [&] {
        return MetricValue(env.Metrics(), "splitbrain_follow_up_rounds_total{cluster=\"demo\"}") >
               before;
      },
      seconds(5)));
  REQUIRE(WaitFor(
      [&] { return env.Verdict() == "healthy" && env.Status()["lock"]["holder"] == new_leader; },
      seconds(20)));
  WaitFor([] { return false; }, seconds(3));  // an absence: Alertmanager delivers at once
  CHECK(env.Notifications("SplitBrain", "firing", start).empty());
  CHECK(env.Notifications("SplitBrainSuspected", "firing", start).empty());
  const std::string metrics = env.Metrics();
  CHECK(HasLine(metrics, "splitbrain_lock_watch_up{cluster=\"demo\"} 1"));
  CHECK(MetricValue(metrics, "splitbrain_lock_watch_changes_total{cluster=\"demo\"}") >= 1);
}

namespace {

// Freezes the leader's Patroni and returns onset -> page: the onset when an independent poller
// saw a second member writable, the page when Alertmanager delivered SplitBrain. Thaws it.
double FrozenLeaderOnsetToPage(Environment& env) {
  const auto start = env.Settle();
  const std::string old_leader = env.cluster->Leader();
  WritablePoller poller(env.cluster->members());
  env.cluster->FreezePatroni(old_leader);
  REQUIRE(WaitFor([&] { return poller.SecondWritableAt().has_value(); },
                  seconds(3 * kSandboxTtlSeconds)));
  const auto onset = *poller.SecondWritableAt();
  REQUIRE(env.webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) { return d.at >= start && Fires(d, "SplitBrain"); },
      seconds(kSandboxTtlSeconds)));
  const auto page = env.Notifications("SplitBrain", "firing", start).front();
  env.cluster->ThawPatroni(old_leader);
  return std::chrono::duration<double>(page.at - onset).count();
}

}  // namespace

TEST_CASE("watch: a frozen leader's double primary pages well before the next 5 s round",
          "[watch][patroni]") {
  const double onset_to_page = FrozenLeaderOnsetToPage(Env());
  std::cout << "watch, probe interval 5 s: onset to page " << onset_to_page << " s\n";
  // Without the watch the page waits for the next round: up to 5 s. With it, the key change
  // starts a round at once and follow-ups every 100 ms, none of which waits for the frozen
  // Patroni's REST API once it has timed out: issue 13's goal, a page within 1 s of the onset
  // at a 5 s probe interval (measured 0.04 s here, 0.5 s at most in the bench).
  CHECK(onset_to_page < 1.0);
}

TEST_CASE(
    "watch on zookeeper: a frozen leader's double primary pages well before the next 5 s round",
    "[watch][patroni][zookeeper]") {
  Environment& env = ZooKeeperEnv();
  const double onset_to_page = FrozenLeaderOnsetToPage(env);
  std::cout << "watch on zookeeper, probe interval 5 s: onset to page " << onset_to_page << " s\n";
  const std::string metrics = env.Metrics();
  CHECK(HasLine(metrics, "splitbrain_lock_watch_up{cluster=\"demo\"} 1"));
  CHECK(MetricValue(metrics, "splitbrain_lock_watch_changes_total{cluster=\"demo\"}") >= 1);
  // The ephemeral leader znode went with the frozen agent's session and came back as the
  // replica's: the watch starts a round at once, not the next 5 s poll.
  CHECK(onset_to_page < 1.0);
}

}  // namespace sbd::testing
