// The write window of a real split brain (PostgreSQL 15): the fork point the detector reports is
// the one the new primary's timeline history file holds, the WAL written since grows with what
// the test writes, and without EXECUTE on pg_read_file the status says why it is unknown.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "detector/config/config.h"
#include "detector/engine/scheduler.h"
#include "detector/output/alerts.h"
#include "detector/output/status.h"
#include "tests/support/pg_sandbox.h"

namespace sbd {
namespace {

using sbd::testing::PgInstance;
using sbd::testing::PgSandbox;

ValidatedConfig TwoMemberConfig(const PgSandbox& sandbox, const PgInstance& a,
                                const PgInstance& b) {
  std::ostringstream yaml;
  yaml << "clusters:\n  - name: demo\n    ttl: 6s\n    probe_interval: 2s\n"
          "    probe_timeout: 2s\n    members:\n";
  for (const PgInstance* m : {&a, &b}) {
    yaml << "      - name: " << m->name() << "\n        dsn: \"" << m->MonitorDsn()
         << "\"\n        password_file: " << sandbox.PasswordFile() << "\n";
  }
  ConfigResult result = ParseConfig(yaml.str(), "test.yml");
  if (auto* errors = std::get_if<std::vector<ConfigError>>(&result)) {
    FAIL("config rejected: " << errors->front().ToString());
  }
  return std::get<ValidatedConfig>(std::move(result));
}

// The switch point on the last line of the history file, read from the data directory.
std::string ForkLsnOnDisk(const PgInstance& promoted) {
  std::ifstream file(promoted.data_dir() + "/pg_wal/00000002.history");
  REQUIRE(file.good());
  std::string line;
  std::string last;
  while (std::getline(file, line)) {
    if (!line.empty() && line[0] != '#') last = line;
  }
  std::istringstream fields(last);
  std::string parent;
  std::string lsn;
  fields >> parent >> lsn;
  CHECK(parent == "1");
  return lsn;
}

std::uint64_t SinceFork(const ClusterSnapshot& c, const std::string& member) {
  REQUIRE(c.write_window.has_value());
  for (const auto& h : c.write_window->holders) {
    if (h.member == member) {
      INFO(h.unknown_reason);
      REQUIRE(h.wal_bytes_since_fork.has_value());
      return *h.wal_bytes_since_fork;
    }
  }
  FAIL("no holder " << member);
  return 0;
}

std::uint64_t WalSince(const PgInstance& pg, const std::string& lsn) {
  return std::stoull(pg.Query("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '" + lsn + "')"));
}

}  // namespace

TEST_CASE("fork wal: with the grant, the fork point is the history file's and WAL since grows",
          "[postgres][fork]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  a.Query("GRANT EXECUTE ON FUNCTION pg_read_file(text) TO splitbrain");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  Scheduler scheduler(TwoMemberConfig(sandbox, a, b));
  scheduler.RunOnce();
  REQUIRE_FALSE(scheduler.Snapshot().front().write_window.has_value());

  b.Promote();
  scheduler.RunOnce();
  ClusterSnapshot c = scheduler.Snapshot().front();
  REQUIRE(c.assessment.verdict == Verdict::kSplitBrain);
  REQUIRE(c.write_window.has_value());
  INFO(c.write_window->fork_unknown_reason);
  const std::string fork = ForkLsnOnDisk(b);
  CHECK(c.write_window->fork_lsn == fork);
  CHECK(c.write_window->fork_timeline == 2);

  // Some megabytes on the old primary, measured by the test on both sides of one round.
  a.Query(
      "CREATE TABLE lost AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 20000) g");
  const std::uint64_t a_before = WalSince(a, fork);
  const std::uint64_t b_before = WalSince(b, fork);
  REQUIRE(a_before > 4'000'000);
  scheduler.RunOnce();
  const std::uint64_t a_after = WalSince(a, fork);
  const std::uint64_t b_after = WalSince(b, fork);
  c = scheduler.Snapshot().front();
  CHECK(SinceFork(c, "pg-a") >= a_before);
  CHECK(SinceFork(c, "pg-a") <= a_after);
  CHECK(SinceFork(c, "pg-b") >= b_before);
  CHECK(SinceFork(c, "pg-b") <= b_after);
  REQUIRE(c.write_window->double_write_seconds.has_value());
  CHECK(*c.write_window->double_write_seconds > 0);

  const nlohmann::json status = StatusJson({c});
  const nlohmann::json& cluster = status["clusters"][0];
  CHECK(cluster["write_window"]["fork_lsn"] == fork);
  CHECK(cluster["members"][0]["wal_bytes_since_fork"] == SinceFork(c, "pg-a"));
  const auto alerts = AlertsFor(c, AlertingSpec{}, AlertLinks{});
  REQUIRE_FALSE(alerts.empty());
  CHECK(alerts.front().annotations.at("description").find("fork at " + fork) != std::string::npos);
}

TEST_CASE("fork wal: without the grant, the status says why the fork point is unknown",
          "[postgres][fork]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  Scheduler scheduler(TwoMemberConfig(sandbox, a, b));
  b.Promote();
  scheduler.RunOnce();
  const ClusterSnapshot c = scheduler.Snapshot().front();
  REQUIRE(c.assessment.verdict == Verdict::kSplitBrain);
  REQUIRE(c.write_window.has_value());
  INFO(c.write_window->fork_unknown_reason);
  CHECK(c.write_window->fork_lsn.empty());
  CHECK(c.write_window->fork_unknown_reason.find(
            "fork point unknown: permission denied for function pg_read_file; grant EXECUTE ON "
            "FUNCTION pg_read_file(text)") == 0);
  for (const auto& h : c.write_window->holders) CHECK_FALSE(h.wal_bytes_since_fork.has_value());
  const std::string text = StatusText({c});
  CHECK(text.find("Write window: fork point unknown: permission denied") != std::string::npos);
  // The probe itself still succeeded: the member reads writable on timeline 2.
  CHECK(c.history.members.at("pg-b").last->seen_writable());
}

}  // namespace sbd
