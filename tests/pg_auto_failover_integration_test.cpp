// End to end on a real pg_auto_failover 2.0 formation (a monitor and two PostgreSQL 15 nodes run
// by pg_autoctl) with Alertmanager 0.25: the detector binary runs as on-call would run it, and a
// webhook receiver inside the test timestamps what Alertmanager delivers.
//
// The scenarios share one environment (built by whichever runs first); each waits for the
// formation settled and the verdict healthy first, and counts only what it caused. The double
// primary runs last: it leaves the old primary partitioned.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "detector/config/config.h"
#include "probes/pg_auto_failover.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/command_poller.h"
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
  if (!env) {
    env = std::make_unique<Environment>();
    // Torn down at exit before the statics its construction first used (cpp-httplib's
    // response-line parser keeps a function-local std::regex): a static unique_ptr alone
    // was destroyed after them, and the etcd call in its teardown then read a destroyed
    // regex (a 48 GB allocation, the suite OOM-killed after passing).
    std::atexit([] { env.reset(); });
  }
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

// Polls pg_is_in_recovery() on two nodes every 50 ms, on its own connections (127.0.0.1,
// past the forwarders), from its own thread, and keeps when both answered writable in the same
// sweep. A node that does not answer counts as not writable.
class OverlapPoller {
 public:
  OverlapPoller(const PafNode& a, const PafNode& b)
      : dsns_{a.Dsn(), b.Dsn()}, thread_([this] { Run(); }) {}
  ~OverlapPoller() { Stop(); }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  /// The last sweep's answers and how many sweeps saw both writable.
  bool Writable(size_t i) const { return writable_[i]; }
  int Overlaps() const { return overlaps_; }
  int Sweeps() const { return sweeps_; }
  /// When the first and the last sweep that saw both writable ended (meaningful if Overlaps()).
  Clock::time_point FirstOverlap() const { return At(first_overlap_); }
  Clock::time_point LastOverlap() const { return At(last_overlap_); }

 private:
  static Clock::time_point At(Clock::rep ticks) {
    return Clock::time_point(Clock::duration(ticks));
  }
  bool Ask(size_t i) {
    try {
      if (!conns_[i])
        conns_[i] = std::make_unique<pqxx::connection>(dsns_[i] + " connect_timeout=1");
      pqxx::nontransaction tx(*conns_[i]);
      return !tx.exec1("SELECT pg_is_in_recovery()")[0].as<bool>();
    } catch (const std::exception&) {
      conns_[i].reset();
      return false;
    }
  }
  void Run() {
    while (!stop_) {
      const auto next = Clock::now() + std::chrono::milliseconds(50);
      const bool first = Ask(0), second = Ask(1);
      writable_[0] = first;
      writable_[1] = second;
      if (first && second) {
        const auto now = Clock::now().time_since_epoch().count();
        if (overlaps_++ == 0) first_overlap_ = now;
        last_overlap_ = now;
      }
      ++sweeps_;
      std::this_thread::sleep_until(next);  // the poll period, not a wait for a condition
    }
  }

  std::string dsns_[2];
  std::unique_ptr<pqxx::connection> conns_[2];
  std::atomic<bool> writable_[2] = {false, false};
  std::atomic<int> overlaps_{0};
  std::atomic<int> sweeps_{0};
  std::atomic<Clock::rep> first_overlap_{0};
  std::atomic<Clock::rep> last_overlap_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

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
  REQUIRE(std::holds_alternative<LockRecord>(record));
  const LockRecord& view = std::get<LockRecord>(record);
  CHECK(view.holder == "member-" + env.formation->Primary());
  CHECK(view.mod_revision > 0);
  CHECK(view.members.size() == 2);
  CHECK(view.rejected.empty());

  spec.pg_auto_failover.formation = "nosuch";
  record = read();
  REQUIRE(std::holds_alternative<LockRecord>(record));
  CHECK(std::get<LockRecord>(record).holder.empty());
  CHECK(std::get<LockRecord>(record).members.empty());

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
        return d.at >= start && Fires(d, "LockStoreUnreadable");
      },
      seconds(20)));
  const auto warnings = env.Delivered("LockStoreUnreadable", "firing", start);
  REQUIRE_FALSE(warnings.empty());
  CHECK(warnings.front()["labels"]["severity"] == "warning");
  CHECK(env.Status()["lock"]["readable"] == false);
  CHECK(env.Delivered("SplitBrain", "firing", start).empty());
  env.formation->StartMonitor();
}

TEST_CASE("pg_auto_failover: a primary partitioned with its keeper running pages only if two wrote",
          "[pg_auto_failover]") {
  Environment& env = Env();
  env.Settle();
  const std::string old_primary = env.formation->Primary();
  PafNode& old_node = env.formation->Node(old_primary);
  PafNode* other = nullptr;
  for (PafNode& node : env.formation->nodes()) {
    if (node.name != old_primary) other = &node;
  }
  REQUIRE(other != nullptr);
  // Mended however the test ends: the scenarios after this one need the formation whole.
  struct Mend {
    PafNode& node;
    ~Mend() {
      node.forwarder->Mend();
      node.monitor_link->Mend();
    }
  } mend{old_node};
  OverlapPoller poller(old_node, *other);
  REQUIRE(WaitFor([&] { return poller.Writable(0) && poller.Sweeps() > 2; }, seconds(10)));
  // Cut off from the monitor, then from the standby; its keeper runs and sees the partition, so
  // it demotes its PostgreSQL after network_partition_timeout; the monitor promotes the standby.
  // The keeper counts a partition only from a standby it saw while the monitor was gone
  // (pg_autoctl 2.0's in_network_partition), so the monitor goes first.
  const auto cut = Clock::now();
  old_node.monitor_link->Cut();
  REQUIRE(WaitFor(
      [&] {
        return env.formation->Log(old_primary).find("lost the monitor, but still have a standby") !=
               std::string::npos;
      },
      seconds(30)));
  old_node.forwarder->Cut();
  const bool promoted = WaitFor([&] { return poller.Writable(1); }, seconds(120));
  const auto promoted_at = Clock::now();
  const bool demoted = WaitFor([&] { return !poller.Writable(0); }, seconds(120));
  const auto demoted_at = Clock::now();
  INFO(env.formation->States() << "\n" << env.formation->Log(old_primary));
  REQUIRE(promoted);
  REQUIRE(demoted);
  // The detector has seen the end: the record names the new primary.
  REQUIRE(WaitFor([&] { return env.Status()["lock"].value("holder", "") == other->name; },
                  seconds(30)));
  poller.Stop();
  std::cout << "keeper-resolved partition: standby writable after "
            << std::chrono::duration<double>(promoted_at - cut).count()
            << " s, old primary not writable after "
            << std::chrono::duration<double>(demoted_at - cut).count() << " s; both writable in "
            << poller.Overlaps() << " of " << poller.Sweeps() << " sweeps, for "
            << std::chrono::duration<double>(poller.LastOverlap() - poller.FirstOverlap()).count()
            << " s\n";
  auto paged = [&](const WebhookReceiver::Delivery& d) {
    return d.at >= cut && FiringAlert(d, "SplitBrain", "paf").has_value();
  };
  // A page only if the poller saw two writable at once; and one for an overlap past the
  // monitor's handover bound (plus a few rounds to see it): a shorter overlap, while the
  // monitor reports the transition, is the handover the detector excuses by design.
  const auto overlap = poller.LastOverlap() - poller.FirstOverlap();
  const bool past_bound =
      poller.Overlaps() > 0 && overlap > kPgAutoFailoverHandoverBound + std::chrono::seconds(5);
  if (poller.Overlaps() == 0) {
    // Alertmanager's group_wait is 1 s: a page the detector sent would be here well within 10.
    CHECK_FALSE(env.webhook->WaitFor(paged, seconds(10)));
  } else {
    const bool page = env.webhook->WaitFor(paged, past_bound ? seconds(60) : seconds(10));
    if (past_bound) CHECK(page);
    const auto pages = env.Delivered("SplitBrain", "firing", cut);
    for (const auto& d : env.webhook->Deliveries()) {
      if (!paged(d)) continue;
      std::cout << "keeper-resolved partition: first overlap seen to page: "
                << std::chrono::duration<double>(d.at - poller.FirstOverlap()).count() << " s\n";
      break;
    }
    std::cout << "keeper-resolved partition: paged: " << (pages.empty() ? "no" : "yes") << "\n";
    if (!pages.empty()) {
      INFO(pages.front().dump(2));
      const std::string summary = pages.front()["annotations"]["summary"];
      CHECK(summary.find("zombie " + old_primary) != std::string::npos);
      CHECK(summary.find("lock holder " + other->name) != std::string::npos);
    }
  }
  old_node.forwarder->Mend();
  old_node.monitor_link->Mend();
  env.formation->WaitSettled(seconds(180));
}

// True when `pg_autoctl show state` lists two nodes whose connection is read-write (with or
// without the "!" of a failing health check): the monitor's own view of a double primary.
bool ShowsTwoReadWrite(const std::string& output) {
  int writable = 0;
  for (const auto& columns : TableRows(output)) {
    if (columns.size() < 7 || columns[0] == "Name") continue;
    if (columns[4].rfind("read-write", 0) == 0) ++writable;
  }
  return writable >= 2;
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
  // Beside the detector, in the same run: `pg_autoctl show state` every second, as users run it.
  const PafFormation& formation = *env.formation;
  CommandPoller show_state([&formation] { return formation.ShowState(seconds(10)); },
                           ShowsTwoReadWrite, std::chrono::milliseconds(1000));
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
      [&](const WebhookReceiver::Delivery& d) { return d.at >= onset && Fires(d, "SplitBrain"); },
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
  // `show state` is what the page is measured against.
  show_state.Report("pg_autoctl show state", "onset", onset, seconds(30), "pg_autoctl show state");
  env.formation->ThawKeeper(old_primary);
  old_node.forwarder->Mend();
}

}  // namespace sbd::testing
