// End to end on a real Patroni 3.0 cluster with etcd 3.4, PostgreSQL 15 and Alertmanager 0.25:
// the detector binary runs as on-call would run it, and a webhook receiver inside the test
// timestamps what Alertmanager delivers. An independent poller (libpqxx, not the detector)
// records when a second member becomes writable.
//
// The scenarios share one environment (built by whichever runs first), and each one settles
// it first (the cluster healed, the verdict healthy) and counts only what it caused, so any
// one of them passes alone or in any order.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>

#include "detector/config/declaration.h"
#include "tests/support/patroni_environment.h"

namespace sbd::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

Environment& Env() {
  // Built by the first scenario; torn down at exit (detector first, etcd last).
  static std::unique_ptr<Environment> env;
  if (!env) {
    env = std::make_unique<Environment>(SBD_BINARY);
    // Torn down at exit before the statics its construction first used (cpp-httplib's
    // response-line parser keeps a function-local std::regex): a static unique_ptr alone
    // was destroyed after them, and the etcd call in its teardown then read a destroyed
    // regex (a 48 GB allocation, the suite OOM-killed after passing).
    std::atexit([] { env.reset(); });
  }
  return *env;
}

}  // namespace

TEST_CASE("patroni: a healthy cluster names the lock holder and pages nobody", "[patroni]") {
  Environment& env = Env();
  const auto start = env.Settle();
  const auto status = env.Status();
  INFO(status.dump(2));
  CHECK(status["lock"]["readable"] == true);
  CHECK(status["lock"]["holder"] == env.cluster->Leader());
  CHECK(status["ttl_seconds"] == kSandboxTtlSeconds);  // read from Patroni's config in etcd
  CHECK(status["lock"]["initialize"] == status["lineage"]);
  const std::string metrics = env.Metrics();
  CHECK(HasLine(metrics, "splitbrain_lock_store_up{cluster=\"demo\"} 1"));
  CHECK(HasLine(metrics, "splitbrain_member_holds_lock{cluster=\"demo\",member=\"" +
                             env.cluster->Leader() + "\"} 1"));
  CHECK(env.FiringSince(start).empty());
}

TEST_CASE("patroni: three switchovers and a failover are counted as transitions and page nobody",
          "[patroni]") {
  Environment& env = Env();
  const auto start = env.Settle();
  const std::string transitions = "splitbrain_transitions_total{cluster=\"demo\"}";
  const double rejected_before = MetricValue(
      env.Metrics(), "splitbrain_confirmations_total{cluster=\"demo\",result=\"rejected\"}");
  const std::string confirmed =
      "splitbrain_confirmations_total{cluster=\"demo\",result=\"confirmed\"}";
  const double confirmed_before = MetricValue(env.Metrics(), confirmed);
  const double transitions_before = MetricValue(env.Metrics(), transitions);
  REQUIRE(transitions_before >= 0);
  std::vector<std::string> leaders = {env.cluster->Leader()};
  for (int i = 0; i < 3; ++i) {
    leaders.push_back(env.cluster->Switchover());
    // Each move is seen before the next one starts (rounds are 1 s apart).
    REQUIRE(WaitFor(
        [&] { return MetricValue(env.Metrics(), transitions) >= transitions_before + i + 1; },
        seconds(15)));
  }
  std::string candidate;
  for (const auto& m : env.cluster->members()) {
    if (m.name != leaders.back()) candidate = m.name;
  }
  leaders.push_back(env.cluster->Failover(candidate));
  for (size_t i = 1; i < leaders.size(); ++i) CHECK(leaders[i] != leaders[i - 1]);
  REQUIRE(WaitFor([&] { return env.Verdict() == "healthy"; }, seconds(20)));
  // Alertmanager would have delivered within group_wait (1 s); give it three.
  WaitFor([] { return false; }, seconds(3));
  CHECK(env.Notifications("SplitBrain", "firing", start).empty());
  CHECK(env.Notifications("SplitBrainSuspected", "firing", start).empty());
  CHECK(WaitFor([&] { return MetricValue(env.Metrics(), transitions) >= transitions_before + 4; },
                seconds(15)));
  const nlohmann::json status = env.Status();
  INFO(status.dump(2));
  REQUIRE(status.contains("last_transition"));
  CHECK(status["last_transition"]["evidence"].get<std::string>().find("to " + leaders.back()) !=
        std::string::npos);
  const std::string metrics = env.Metrics();
  CHECK(MetricValue(metrics, confirmed) == confirmed_before);  // none confirmed by this scenario
  std::cout << "switchovers and failover: "
            << MetricValue(metrics, transitions) - transitions_before << " transitions counted\n";
  std::cout << "switchovers: confirmation re-probes rejected "
            << MetricValue(metrics,
                           "splitbrain_confirmations_total{cluster=\"demo\",result=\"rejected\"}") -
                   rejected_before
            << " candidate(s)\n";
}

TEST_CASE(
    "patroni: a new cluster built beside the old one with the same file_sd labels is drift, "
    "with or without a provisioning declaration; never a page",
    "[patroni]") {
  Environment& env = Env();
  const auto start = env.Settle();
  PatroniCluster other(env.root.path() + "/other", "other", *env.etcd, 2, kSandboxTtlSeconds, 1, 3);
  other.WaitHealthy();
  std::vector<const PatroniMember*> extra;
  for (const auto& m : other.members()) extra.push_back(&m);
  // The members come from a file_sd target file (the config changed: SIGHUP). The new
  // targets are written only once that reload is done: the file watcher it starts is what
  // must see them.
  env.WriteFileSdConfig({});
  REQUIRE(env.detector->Reload(seconds(20)));
  REQUIRE(WaitFor(
      [&] {
        const nlohmann::json status = env.Status();
        return status.value("verdict", "") == "healthy" && status["members"].size() == 3;
      },
      seconds(20)));
  // ...and when the new cluster's targets join it under the same label, the detector
  // reloads by itself: no SIGHUP.
  env.WriteFileSdConfig(extra);
  std::string trail;
  const bool drifted = env.ReachesVerdict("drift", seconds(40), trail);
  INFO(trail);
  REQUIRE(drifted);
  const auto status = env.Status();
  INFO(status.dump(2));
  const std::string other_leader = other.Leader();
  CHECK(status["evidence"]["drift"] == std::vector<std::string>{"other-" + other_leader});
  CHECK(status["evidence"]["writable"].size() == 1);
  CHECK(env.webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        return d.at >= start && Fires(d, "InventoryDrift");
      },
      seconds(15)));
  CHECK(env.Notifications("SplitBrain", "firing", start).empty());
  bool regrouped = false;
  for (const auto& s : status["suppressions"]) regrouped |= s["suppressor"] == "label_regrouping";
  CHECK(regrouped);

  // Declared: the new scope's drift is suppressed, visibly, and still pages nobody.
  WriteFile(env.dropins, "other.yml",
            "kind: provisioning\ncluster: demo\nscope: other\nreason: building the other "
            "cluster CHG-11\nauthor: frank\nexpires: " +
                FormatRfc3339(std::chrono::system_clock::now() + std::chrono::hours(1)) + "\n");
  REQUIRE(WaitFor([&] { return env.Verdict() == "suppressed"; }, seconds(15)));
  const auto declared = env.Status();
  INFO(declared.dump(2));
  CHECK(declared["raw_verdict"] == "drift");
  bool provisioning = false;
  for (const auto& s : declared["suppressions"]) {
    provisioning |=
        s["suppressor"] == "provisioning" && s["reason"] == "building the other cluster CHG-11";
  }
  CHECK(provisioning);
  CHECK(env.Notifications("SplitBrain", "firing", start).empty());
  REQUIRE(unlink((env.dropins + "/other.yml").c_str()) == 0);

  // Back to the demo cluster alone before the next scenario.
  env.WriteConfig({});
  REQUIRE(env.detector->Reload(seconds(20)));
  REQUIRE(WaitFor([&] { return env.Verdict() == "healthy"; }, seconds(20)));
}

TEST_CASE("patroni: a frozen leader's double primary pages within one TTL and resolves",
          "[patroni]") {
  Environment& env = Env();
  const auto start = env.Settle();
  const std::string old_leader = env.cluster->Leader();
  WritablePoller poller(env.cluster->members());
  env.cluster->FreezePatroni(old_leader);

  // Patroni promotes a replica about one TTL later; the frozen leader's PostgreSQL stays up.
  REQUIRE(WaitFor([&] { return poller.SecondWritableAt().has_value(); },
                  seconds(3 * kSandboxTtlSeconds)));
  const auto onset = *poller.SecondWritableAt();
  REQUIRE(env.webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) { return d.at >= start && Fires(d, "SplitBrain"); },
      seconds(2 * kSandboxTtlSeconds)));
  const auto page = env.Notifications("SplitBrain", "firing", start).front();
  const double onset_to_page = std::chrono::duration<double>(page.at - onset).count();
  std::cout << "onset to page: " << onset_to_page << " s (TTL " << kSandboxTtlSeconds << " s)\n";
  CHECK(onset_to_page < kSandboxTtlSeconds);

  nlohmann::json alert;
  for (const auto& a : page.body["alerts"]) {
    if (a["labels"]["alertname"] == "SplitBrain") alert = a;
  }
  INFO(alert.dump(2));
  CHECK(alert["labels"]["severity"] == "critical");
  CHECK(alert["labels"]["cluster"] == "demo");
  CHECK(alert["labels"]["scope"] == "demo");
  const std::string new_leader = env.Status()["lock"]["holder"];
  CHECK(new_leader != old_leader);
  const std::string summary = alert["annotations"]["summary"];
  CHECK(summary.find("zombie " + old_leader) != std::string::npos);
  CHECK(summary.find("lock holder " + new_leader) != std::string::npos);
  CHECK(alert["annotations"]["runbook_url"].get<std::string>().find("/runbooks/split-brain.md") !=
        std::string::npos);
  auto zombie_shown = [&] {
    const nlohmann::json status = env.Status();  // the loop must not iterate a temporary
    for (const auto& m : status["members"]) {
      if (m["name"] == old_leader) {
        return m.value("zombie", false) && m.contains("last_seen_holding_lock");
      }
    }
    return false;
  };
  CHECK(WaitFor(zombie_shown, seconds(5)));

  // Thawed, Patroni sees it lost the lock and demotes its PostgreSQL: the page resolves.
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
  std::cout << "thaw to resolve: " << std::chrono::duration<double>(Clock::now() - thaw).count()
            << " s\n";
  env.cluster->Heal();
}

TEST_CASE("patroni: with etcd stopped the detector says so and keeps probing PostgreSQL",
          "[patroni]") {
  Environment& env = Env();
  const auto start = env.Settle();
  env.etcd->Stop();
  REQUIRE(WaitFor(
      [&] { return HasLine(env.Metrics(), "splitbrain_lock_store_up{cluster=\"demo\"} 0"); },
      seconds(10)));
  CHECK(env.webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        return d.at >= start && Fires(d, "LockStoreUnreadable");
      },
      seconds(15)));
  const std::string metrics = env.Metrics();
  INFO(metrics);
  // Unknown is not "does not hold": no holds_lock series while the store cannot be read.
  CHECK(metrics.find("splitbrain_member_holds_lock{") == std::string::npos);
  // Every member's PostgreSQL is still read. Without its DCS, Patroni demotes the leader,
  // whose server restarts as a replica: wait for that, with a deadline, not for an instant.
  auto all_up = [&] {
    const std::string body = env.Metrics();
    for (const auto& m : env.cluster->members()) {
      if (!HasLine(body, "splitbrain_member_up{cluster=\"demo\",member=\"" + m.name + "\"} 1")) {
        return false;
      }
    }
    return HasLine(body, "splitbrain_lock_store_up{cluster=\"demo\"} 0");
  };
  CHECK(WaitFor(all_up, seconds(30)));
  const auto status = env.Status();
  CHECK(status["lock"]["readable"] == false);
  const double rounds = MetricValue(metrics, "splitbrain_rounds_total{cluster=\"demo\"}");
  CHECK(WaitFor(
      [&] {
        return MetricValue(env.Metrics(), "splitbrain_rounds_total{cluster=\"demo\"}") >=
               rounds + 3;
      },
      seconds(10)));

  env.etcd->Start();
  CHECK(WaitFor(
      [&] { return HasLine(env.Metrics(), "splitbrain_lock_store_up{cluster=\"demo\"} 1"); },
      seconds(20)));
}

}  // namespace sbd::testing
