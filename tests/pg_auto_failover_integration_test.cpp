// End to end on a real pg_auto_failover 2.0 formation (a monitor and two PostgreSQL 15 nodes run
// by pg_autoctl) with Alertmanager 0.25: the detector binary runs as on-call would run it, and a
// webhook receiver inside the test timestamps what Alertmanager delivers.
//
// The scenarios share one environment (built by whichever runs first); each waits for the
// formation settled and the verdict healthy first, and counts only what it caused. The double
// primary runs last: it leaves the old primary partitioned.
#include <catch2/catch.hpp>
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>

#include "detector/config/config.h"
#include "probes/pg_auto_failover.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/pg_auto_failover_sandbox.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace sbd::testing {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

struct Environment {
  TempDir root{"sbd-paf-it-"};
  std::unique_ptr<PafFormation> formation;
  std::unique_ptr<WebhookReceiver> webhook;
  std::unique_ptr<AlertmanagerServer> alertmanager;
  std::unique_ptr<DetectorProcess> detector;
  int port = 0;

  Environment() {
    const auto start = Clock::now();
    formation = std::make_unique<PafFormation>(2);
    std::cout << "pg_auto_failover formation up in "
              << std::chrono::duration<double>(Clock::now() - start).count() << " s\n";
    webhook = std::make_unique<WebhookReceiver>();
    alertmanager = std::make_unique<AlertmanagerServer>(root.path() + "/am", webhook->url());
    std::string yaml = "alerting:\n  alertmanagers:\n    - url: " + alertmanager->url() +
                       "\n  resend_interval: 5s\nclusters:\n  - name: paf\n"
                       "    kind: pg_auto_failover\n    ttl: 10s\n    probe_interval: 1s\n"
                       "    probe_timeout: 800ms\n    pg_auto_failover:\n      monitor: \"" +
                       formation->MonitorDsn() + "\"\n    members:\n";
    for (const PafNode& node : formation->nodes()) {
      yaml += "      - name: " + node.name + "\n        dsn: \"" + node.Dsn() + "\"\n";
    }
    const std::string config = WriteFile(root.path(), "detector.yml", yaml);
    port = FreeLoopbackPort();
    detector = StartReadyDetector(SBD_BINARY, config, port, root.path() + "/detector.log");
  }

  nlohmann::json Status() const { return ClusterStatus(port, "paf"); }
  std::string Verdict() const { return Status().value("verdict", ""); }
  std::string Metrics() const { return HttpGet(port, "/metrics"); }

  Clock::time_point Settle() {
    formation->WaitSettled(seconds(120));
    if (!WaitFor([&] { return Verdict() == "healthy"; }, seconds(60))) {
      throw std::runtime_error("detector not healthy:\n" + Status().dump(2));
    }
    return Clock::now();
  }

  // Alerts delivered with `status` since `since`, by name.
  std::vector<nlohmann::json> Delivered(const std::string& name, const std::string& status,
                                        Clock::time_point since) const {
    std::vector<nlohmann::json> out;
    for (const auto& d : webhook->Deliveries()) {
      if (d.at < since || !d.body.contains("alerts")) continue;
      for (const auto& alert : d.body["alerts"]) {
        if (alert["labels"].value("alertname", "") == name && alert.value("status", "") == status) {
          out.push_back(alert);
        }
      }
    }
    return out;
  }
};

Environment& Env() {
  static std::unique_ptr<Environment> env;
  if (!env) env = std::make_unique<Environment>();
  return *env;
}

// True when the node's PostgreSQL, read directly, takes writes.
bool Writable(const PafNode& node) {
  try {
    pqxx::connection conn(node.Dsn() + " connect_timeout=2");
    pqxx::nontransaction tx(conn);
    return !tx.exec1("SELECT pg_is_in_recovery()")[0].as<bool>();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

TEST_CASE("pg_auto_failover: a healthy formation names the monitor's primary and pages nobody",
          "[pg_auto_failover]") {
  Environment& env = Env();
  const auto start = env.Settle();
  const nlohmann::json status = env.Status();
  INFO(status.dump(2));
  CHECK(status["lock"]["readable"] == true);
  CHECK(status["lock"]["holder"] == env.formation->Primary());
  CHECK(HasLine(env.Metrics(), "splitbrain_lock_store_up{cluster=\"paf\"} 1"));
  WaitFor([] { return false; }, seconds(2));  // Alertmanager's group_wait is 1 s
  CHECK(env.Delivered("SplitBrain", "firing", start).empty());
}

TEST_CASE("pg_auto_failover discovery: no member listed, the monitor's nodes are all probed",
          "[pg_auto_failover][discovery]") {
  Environment& env = Env();
  env.Settle();
  const std::string yaml =
      "clusters:\n  - name: paf\n    kind: pg_auto_failover\n    probe_interval: 1s\n"
      "    probe_timeout: 800ms\n    discover: true\n    discovery:\n"
      "      dsn: user=postgres dbname=postgres\n    pg_auto_failover:\n      monitor: \"" +
      env.formation->MonitorDsn() + "\"\n";
  const std::string config = WriteFile(env.root.path(), "discovering.yml", yaml);
  const int port = FreeLoopbackPort();
  auto detector =
      StartReadyDetector(SBD_BINARY, config, port, env.root.path() + "/discovering.log");
  nlohmann::json status;
  const bool healthy = WaitFor(
      [&] {
        status = ClusterStatus(port, "paf");
        return status.value("verdict", "") == "healthy" &&
               status["members"].size() == env.formation->nodes().size();
      },
      seconds(30));
  INFO(status.dump(2) << "\n" << detector->Log());
  REQUIRE(healthy);
  CHECK(status["lock"]["holder"] == env.formation->Primary());
  for (const PafNode& node : env.formation->nodes()) {
    bool found = false;
    for (const auto& m : status["members"]) {
      if (m["name"] != node.name) continue;
      found = m.value("discovered", false);
      // The address the monitor registered (the forwarder), not the config's.
      CHECK(m.dump().find("127.0.0.2:" + std::to_string(node.port)) != std::string::npos);
    }
    CHECK(found);
  }
  CHECK(status["discovery"]["not_probed"].empty());
  CHECK(status["lock"]["rejected_keys"].empty());
}

TEST_CASE("pg_auto_failover: the store reads the monitor's record; a server without it fails",
          "[pg_auto_failover]") {
  Environment& env = Env();
  env.Settle();
  ClusterSpec spec;
  spec.kind = "pg_auto_failover";
  spec.probe_timeout = std::chrono::milliseconds(2000);
  for (const PafNode& node : env.formation->nodes()) {
    MemberSpec member;
    member.name = "member-" + node.name;
    member.address = "127.0.0.2:" + std::to_string(node.port);  // as the monitor registers it
    spec.members.push_back(member);
  }
  spec.pg_auto_failover.monitor.name = "monitor";
  spec.pg_auto_failover.monitor.dsn = env.formation->MonitorDsn();
  auto read = [&] {
    PgAutoFailoverStore store(spec);
    return store.Read(std::chrono::steady_clock::now() + seconds(3));
  };
  auto record = read();
  REQUIRE(std::holds_alternative<DcsView>(record));
  const DcsView& view = std::get<DcsView>(record);
  CHECK(view.holder == "member-" + env.formation->Primary());
  CHECK(view.mod_revision > 0);
  CHECK(view.members.size() == 2);
  CHECK(view.rejected.empty());

  spec.pg_auto_failover.formation = "nosuch";
  record = read();
  REQUIRE(std::holds_alternative<DcsView>(record));
  CHECK(std::get<DcsView>(record).holder.empty());
  CHECK(std::get<DcsView>(record).members.empty());

  // A node's own PostgreSQL has no pgautofailover schema: a failed read, never a record.
  spec.pg_auto_failover.monitor.dsn = env.formation->nodes().front().Dsn();
  record = read();
  REQUIRE(std::holds_alternative<ProbeFailure>(record));
  CHECK(std::get<ProbeFailure>(record).message.find("pgautofailover") != std::string::npos);
}

TEST_CASE("pg_auto_failover: three switchovers by pg_autoctl page nobody", "[pg_auto_failover]") {
  Environment& env = Env();
  const auto start = env.Settle();
  for (int i = 0; i < 3; ++i) {
    const std::string before = env.formation->Primary();
    env.formation->Switchover();
    env.formation->WaitSettled(seconds(60));
    REQUIRE(env.formation->Primary() != before);
    REQUIRE(WaitFor(
        [&] { return env.Status()["lock"].value("holder", "") == env.formation->Primary(); },
        seconds(20)));
  }
  REQUIRE(WaitFor([&] { return env.Verdict() == "healthy"; }, seconds(30)));
  WaitFor([] { return false; }, seconds(3));
  INFO(env.Status().dump(2));
  CHECK(env.Delivered("SplitBrain", "firing", start).empty());
}

TEST_CASE("pg_auto_failover: the monitor stopped is a warning, never a page",
          "[pg_auto_failover]") {
  Environment& env = Env();
  const auto start = env.Settle();
  env.formation->StopMonitor();
  REQUIRE(
      WaitFor([&] { return HasLine(env.Metrics(), "splitbrain_lock_store_up{cluster=\"paf\"} 0"); },
              seconds(15)));
  CHECK(env.webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        return d.at >= start && d.body.dump().find("\"LockStoreUnreadable\"") != std::string::npos;
      },
      seconds(20)));
  const auto warnings = env.Delivered("LockStoreUnreadable", "firing", start);
  REQUIRE_FALSE(warnings.empty());
  CHECK(warnings.front()["labels"]["severity"] == "warning");
  CHECK(env.Status()["lock"]["readable"] == false);
  CHECK(env.Delivered("SplitBrain", "firing", start).empty());
  env.formation->StartMonitor();
}

TEST_CASE("pg_auto_failover: an old primary cut off with its keeper frozen pages naming it",
          "[pg_auto_failover]") {
  Environment& env = Env();
  const auto start = env.Settle();
  const std::string old_primary = env.formation->Primary();
  PafNode& old_node = env.formation->Node(old_primary);
  PafNode* other = nullptr;
  for (PafNode& node : env.formation->nodes()) {
    if (node.name != old_primary) other = &node;
  }
  REQUIRE(other != nullptr);
  // The keeper cannot demote its PostgreSQL; the monitor and the standby no longer reach it;
  // clients on 127.0.0.1 still do.
  env.formation->FreezeKeeper(old_primary);
  old_node.forwarder->Cut();
  REQUIRE(WaitFor([&] { return Writable(*other); }, seconds(90), std::chrono::milliseconds(200)));
  const auto onset = Clock::now();
  REQUIRE(Writable(old_node));
  std::cout << "double primary after " << std::chrono::duration<double>(onset - start).count()
            << " s: " << env.formation->States() << "\n";
  REQUIRE(env.webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        return d.at >= onset && d.body.dump().find("\"SplitBrain\"") != std::string::npos;
      },
      seconds(60)));
  const auto pages = env.Delivered("SplitBrain", "firing", onset);
  REQUIRE_FALSE(pages.empty());
  const nlohmann::json& page = pages.front();
  INFO(page.dump(2));
  std::cout << "onset to page: " << std::chrono::duration<double>(Clock::now() - onset).count()
            << " s\n";
  CHECK(page["labels"]["severity"] == "critical");
  const std::string summary = page["annotations"]["summary"];
  CHECK(summary.find("zombie " + old_primary) != std::string::npos);
  CHECK(summary.find("lock holder " + other->name) != std::string::npos);
  const nlohmann::json status = env.Status();
  INFO(status.dump(2));
  CHECK(status["lock"]["holder"] == other->name);
  bool zombie = false;
  for (const auto& m : status["members"]) {
    if (m["name"] == old_primary) zombie = m.value("zombie", false);
  }
  CHECK(zombie);
  env.formation->ThawKeeper(old_primary);
  old_node.forwarder->Mend();
}

}  // namespace sbd::testing
