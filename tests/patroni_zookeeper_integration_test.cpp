// End to end on a real Patroni 3.0 cluster whose DCS is a three-server ZooKeeper 3.8 ensemble
// (issue 27: Patroni's zookeeper: DCS, through kazoo; every server given to Patroni and to the
// detector), with PostgreSQL 15 and Alertmanager 0.25: the detector binary
// reads the scope with `zookeeper:` instead of `etcd:`, a webhook receiver inside the test
// timestamps what Alertmanager delivers, and an independent poller (libpqxx) records when a
// second member becomes writable.
//
// The scenarios share one environment (built by whichever runs first); each settles it first
// (the cluster healed, the verdict healthy) and counts only what it caused.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/patroni_environment.h"

namespace sbd::testing {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

Environment& Env() {
  // Two members: the leader and the replica that takes over. Torn down at exit.
  static std::unique_ptr<Environment> env;
  if (!env) {
    env = std::make_unique<Environment>(SBD_BINARY, PatroniDcs::kZooKeeperEnsemble, 2);
    // Torn down at exit before the statics its construction first used (cpp-httplib's
    // response-line parser keeps a function-local std::regex): a static unique_ptr alone
    // was destroyed after them, and the etcd call in its teardown then read a destroyed
    // regex (a 48 GB allocation, the suite OOM-killed after passing).
    std::atexit([] { env.reset(); });
  }
  return *env;
}

}  // namespace

TEST_CASE("patroni on zookeeper: a healthy two-member cluster reads healthy with the leader named",
          "[patroni][zookeeper]") {
  Environment& env = Env();
  const auto start = env.Settle();
  const auto status = env.Status();
  INFO(status.dump(2));
  CHECK(status["verdict"] == "healthy");
  CHECK(status["lock"]["readable"] == true);
  CHECK(status["lock"]["holder"] == env.cluster->Leader());
  for (const std::string& host : env.ensemble->host_list()) {
    CHECK(status["lock"]["endpoint"].get<std::string>().find(host) != std::string::npos);
  }
  CHECK(status["lock"]["mod_revision"].get<std::int64_t>() > 0);  // the leader znode's czxid
  CHECK(status["ttl_seconds"] == kSandboxTtlSeconds);  // read from Patroni's config znode
  CHECK(status["lock"]["initialize"] == status["lineage"]);
  CHECK(status["lock"]["initialize"].get<std::string>().size() >= 15);  // a system identifier
  CHECK(status["members"].size() == 2);
  const std::string metrics = env.Metrics();
  CHECK(HasLine(metrics, "splitbrain_lock_store_up{cluster=\"demo\"} 1"));
  CHECK(HasLine(metrics, "splitbrain_member_holds_lock{cluster=\"demo\",member=\"" +
                             env.cluster->Leader() + "\"} 1"));
  CHECK(env.FiringSince(start).empty());
}

TEST_CASE(
    "patroni on zookeeper: three switchovers are counted as transitions, the leader znode's "
    "czxid only grows, and nobody is paged",
    "[patroni][zookeeper]") {
  Environment& env = Env();
  const auto start = env.Settle();
  const std::string transitions = "splitbrain_transitions_total{cluster=\"demo\"}";
  const std::string confirmed =
      "splitbrain_confirmations_total{cluster=\"demo\",result=\"confirmed\"}";
  const double transitions_before = MetricValue(env.Metrics(), transitions);
  const double confirmed_before = MetricValue(env.Metrics(), confirmed);
  REQUIRE(transitions_before >= 0);
  std::vector<std::string> leaders = {env.cluster->Leader()};
  std::int64_t czxid = env.Status()["lock"]["mod_revision"].get<std::int64_t>();
  for (int i = 0; i < 3; ++i) {
    leaders.push_back(env.cluster->Switchover());
    CHECK(leaders.back() != leaders[leaders.size() - 2]);
    // Each move is seen, the new leader's znode read, before the next one starts.
    nlohmann::json status;
    REQUIRE(WaitFor(
        [&] {
          status = env.Status();
          return MetricValue(env.Metrics(), transitions) >= transitions_before + i + 1 &&
                 status["lock"].value("holder", "") == leaders.back();
        },
        seconds(20)));
    INFO(status.dump(2));
    const std::int64_t next = status["lock"]["mod_revision"].get<std::int64_t>();
    CHECK(next > czxid);  // a new ephemeral znode: a higher zxid, the token only grows
    czxid = next;
  }
  REQUIRE(WaitFor([&] { return env.Verdict() == "healthy"; }, seconds(20)));
  // Alertmanager would have delivered within group_wait (1 s); give it three.
  WaitFor([] { return false; }, seconds(3));
  CHECK(env.Notifications("SplitBrain", "firing", start).empty());
  CHECK(env.Notifications("SplitBrainSuspected", "firing", start).empty());
  CHECK(env.Notifications("LockStoreUnreadable", "firing", start).empty());
  CHECK(MetricValue(env.Metrics(), confirmed) == confirmed_before);
  std::cout << "patroni on zookeeper, three switchovers: "
            << MetricValue(env.Metrics(), transitions) - transitions_before
            << " transitions counted, nothing paged\n";
}

TEST_CASE(
    "patroni on zookeeper: a frozen leader whose session expired while its PostgreSQL stays "
    "writable pages SplitBrain naming it within one ttl of the promotion",
    "[patroni][zookeeper]") {
  Environment& env = Env();
  const auto start = env.Settle();
  const std::string old_leader = env.cluster->Leader();
  const std::int64_t old_czxid = env.Status()["lock"]["mod_revision"];
  WritablePoller poller(env.cluster->members());
  env.cluster->FreezePatroni(old_leader);

  // The frozen agent sends no pings: ZooKeeper expires its session after the ttl, deletes the
  // leader znode, and the replica creates its own and promotes.
  REQUIRE(WaitFor([&] { return poller.SecondWritableAt().has_value(); },
                  seconds(4 * kSandboxTtlSeconds)));
  const auto onset = *poller.SecondWritableAt();
  REQUIRE(env.webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) { return d.at >= start && Fires(d, "SplitBrain"); },
      seconds(2 * kSandboxTtlSeconds)));
  const auto page = env.Notifications("SplitBrain", "firing", start).front();
  const double onset_to_page = std::chrono::duration<double>(page.at - onset).count();
  std::cout << "zookeeper: promotion to page: " << onset_to_page << " s (TTL " << kSandboxTtlSeconds
            << " s)\n";
  CHECK(onset_to_page < kSandboxTtlSeconds);

  nlohmann::json alert;
  for (const auto& a : page.body["alerts"]) {
    if (a["labels"]["alertname"] == "SplitBrain") alert = a;
  }
  INFO(alert.dump(2));
  CHECK(alert["labels"]["severity"] == "critical");
  CHECK(alert["labels"]["cluster"] == "demo");
  CHECK(alert["labels"]["scope"] == "demo");
  const nlohmann::json status = env.Status();
  INFO(status.dump(2));
  const std::string new_leader = status["lock"]["holder"];
  CHECK(new_leader != old_leader);
  // The new leader's znode is a new one: its czxid, the fencing token, went up.
  CHECK(status["lock"]["mod_revision"].get<std::int64_t>() > old_czxid);
  const std::string summary = alert["annotations"]["summary"];
  CHECK(summary.find("zombie " + old_leader) != std::string::npos);
  CHECK(summary.find("lock holder " + new_leader) != std::string::npos);

  // Thawed, Patroni finds its session gone and demotes its PostgreSQL: the page resolves.
  const auto thaw = Clock::now();
  env.cluster->ThawPatroni(old_leader);
  CHECK(env.webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        if (d.at < thaw) return false;
        for (const auto& a : d.body["alerts"]) {
          if (a["labels"]["alertname"] == "SplitBrain" && a["status"] == "resolved") return true;
        }
        return false;
      },
      seconds(90)));
  env.cluster->Heal();
}

TEST_CASE(
    "patroni on zookeeper: with the ensemble's quorum lost the lock store is unreadable, never "
    "healthy",
    "[patroni][zookeeper]") {
  Environment& env = Env();
  const auto start = env.Settle();
  // Two of three servers down: the last one refuses its clients.
  env.ensemble->server(0).Stop();
  env.ensemble->server(1).Stop();
  REQUIRE(WaitFor(
      [&] { return HasLine(env.Metrics(), "splitbrain_lock_store_up{cluster=\"demo\"} 0"); },
      seconds(15)));
  CHECK(env.webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        return d.at >= start && Fires(d, "LockStoreUnreadable");
      },
      seconds(20)));
  // Unknown is not "does not hold": the store is never read as healthy while it is down, and
  // its error says why. (The verdict is the members' business: Patroni demotes its leader
  // without its DCS, at a moment of its own.)
  for (int round = 0; round < 3; ++round) {
    const nlohmann::json status = env.Status();
    INFO(status.dump(2));
    CHECK(status["lock"]["readable"] == false);
    CHECK(status["lock"].value("error", "").find("ZooKeeper") != std::string::npos);
    const std::string metrics = env.Metrics();
    CHECK(HasLine(metrics, "splitbrain_lock_store_up{cluster=\"demo\"} 0"));
    CHECK(metrics.find("splitbrain_member_holds_lock{") == std::string::npos);
    WaitFor([] { return false; }, seconds(1));  // a round apart
  }
  CHECK(env.Notifications("SplitBrain", "firing", start).empty());

  env.ensemble->server(0).Start();
  env.ensemble->server(1).Start();
  CHECK(WaitFor(
      [&] { return HasLine(env.Metrics(), "splitbrain_lock_store_up{cluster=\"demo\"} 1"); },
      seconds(30)));
}

TEST_CASE(
    "patroni on zookeeper: with discover and no member listed, both members are found under "
    "members/ and read, the leader named",
    "[patroni][zookeeper][discovery]") {
  Environment& env = Env();
  env.Settle();
  ReplaceFile(env.root.path(), "detector.yml",
              env.Header() + "    discover: true\n    discovery:\n      dsn: \"user=" +
                  PatroniCluster::kMonitorUser +
                  " dbname=postgres\"\n      password_file: " + env.cluster->PasswordFile() + "\n");
  REQUIRE(env.detector->Reload(seconds(20)));
  nlohmann::json status;
  const bool found = WaitFor(
      [&] {
        status = env.Status();
        if (status.value("verdict", "") != "healthy" || status["members"].size() != 2) return false;
        for (const auto& m : status["members"]) {
          if (!m.value("discovered", false) || m.value("state", "") == "unreadable") return false;
        }
        return status["lock"].value("holder", "") == env.cluster->Leader();
      },
      seconds(30));
  INFO(status.dump(2));
  INFO(env.detector->Log());
  CHECK(found);
  for (const auto& member : env.cluster->members()) {
    bool seen = false;
    for (const auto& m : status["members"]) {
      if (m["name"] == member.name) {
        seen = true;
        CHECK(m["state"] == (member.name == env.cluster->Leader() ? "writable" : "replica"));
      }
    }
    CHECK(seen);
  }
  CHECK(status["discovery"]["not_probed"].empty());
  // No discovery password in the status or the metrics.
  CHECK(status.dump().find(PatroniCluster::kMonitorPassword) == std::string::npos);
  CHECK(env.Metrics().find(PatroniCluster::kMonitorPassword) == std::string::npos);
  env.WriteConfig({});
  REQUIRE(env.detector->Reload(seconds(20)));
  REQUIRE(WaitFor(
      [&] {
        const nlohmann::json now = env.Status();
        return now["members"].size() == 2 && !now["members"][0].value("discovered", false);
      },
      seconds(30)));
}

}  // namespace sbd::testing
