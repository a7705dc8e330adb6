// Witnesses against real PostgreSQL 15: a primary and two streaming replicas, then one replica
// promoted while the old primary stays up. The replicas' WAL receivers say whom they follow.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "detector/config/config.h"
#include "detector/engine/scheduler.h"
#include "detector/output/status.h"
#include "probes/postgres_async.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace sbd {
namespace {

using nlohmann::json;
using sbd::testing::PgInstance;
using sbd::testing::PgSandbox;
using sbd::testing::WaitFor;
using std::chrono::milliseconds;
using std::chrono::seconds;

ValidatedConfig MustParse(const std::string& yaml) {
  ConfigResult result = ParseConfig(yaml, "test.yml");
  if (auto* errors = std::get_if<std::vector<ConfigError>>(&result)) {
    FAIL("config rejected: " << errors->front().ToString());
  }
  return std::get<ValidatedConfig>(std::move(result));
}

std::string PlainCluster(const PgSandbox& sandbox, const std::vector<const PgInstance*>& members) {
  std::ostringstream out;
  out << "clusters:\n  - name: demo\n    ttl: 6s\n    probe_interval: 2s\n"
      << "    probe_timeout: 1s\n    members:\n";
  for (const PgInstance* m : members) {
    out << "      - name: " << m->name() << "\n        dsn: \"" << m->MonitorDsn()
        << "\"\n        password_file: " << sandbox.PasswordFile() << "\n";
  }
  return out.str();
}

// A role that may read pg_control_system() but lacks pg_monitor, created on `primary` and
// waited for on `replica`; the member spec logs in as it to `replica`.
MemberSpec RoleWithoutStats(const PgSandbox& sandbox, PgInstance& primary, PgInstance& replica) {
  primary.Query(std::string("CREATE ROLE nostats LOGIN PASSWORD '") + PgSandbox::kMonitorPassword +
                "'; GRANT EXECUTE ON FUNCTION pg_control_system(), pg_control_checkpoint() "
                "TO nostats;");
  REQUIRE(WaitFor(
      [&] {
        return replica.Query("SELECT count(*) FROM pg_roles WHERE rolname = 'nostats'") == "1";
      },
      seconds(20), milliseconds(100)));
  MemberSpec spec;
  spec.name = replica.name();
  spec.dsn =
      "host=127.0.0.1 port=" + std::to_string(replica.port()) + " user=nostats dbname=postgres";
  spec.address = "127.0.0.1:" + std::to_string(replica.port());
  spec.password_file = sandbox.PasswordFile();
  return spec;
}

}  // namespace

TEST_CASE("witness: replicas stream from the primary, and one stays with it after a promotion",
          "[witness][integration]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  PgInstance& c = sandbox.StartReplica("pg-c", a);
  Scheduler scheduler(MustParse(PlainCluster(sandbox, {&a, &b, &c})));
  ClusterSnapshot snapshot;
  json cluster;
  auto round = [&] {
    scheduler.RunOnce();
    snapshot = scheduler.Snapshot().front();
    cluster = StatusJson({snapshot})["clusters"][0];
  };

  // Before: both replicas' receivers stream from pg-a, on its timeline.
  const json both = {{"pg-a", {"pg-b", "pg-c"}}};
  CHECK(WaitFor(
      [&] {
        round();
        return cluster["witnesses"] == both;
      },
      seconds(20), milliseconds(200)));
  INFO(cluster.dump(2));
  CHECK(cluster["members"][0]["streams_from"].is_null());
  CHECK(cluster["members"][1]["streams_from"]["from"] == "pg-a");
  CHECK(cluster["members"][1]["streams_from"]["status"] == "streaming");
  CHECK(cluster["members"][2]["streams_from"]["timeline"] == 1);
  CHECK(StatusText({snapshot}).find("Witnesses: pg-b, pg-c stream from pg-a\n") !=
        std::string::npos);

  // Without pg_read_all_stats the receiver is there but its details are hidden.
  PostgresAsyncProbe unprivileged(RoleWithoutStats(sandbox, a, c), milliseconds(2000));
  const Observation hidden = unprivileged.Probe(SteadyClock::now() + seconds(5), nullptr);
  REQUIRE(hidden.ok());
  REQUIRE(hidden.reading()->upstream);
  CHECK(hidden.reading()->upstream->hidden);
  CHECK(hidden.reading()->upstream->sender_host.empty());

  // pg-b promoted while pg-a stays up: pg-c still follows pg-a, nobody follows pg-b.
  b.Promote();
  round();
  INFO(cluster.dump(2));
  REQUIRE(snapshot.assessment.verdict == Verdict::kSplitBrain);
  CHECK(cluster["witnesses"] == json({{"pg-a", {"pg-c"}}, {"pg-b", json::array()}}));
  CHECK(cluster["members"][1]["streams_from"].is_null());
  CHECK(cluster["members"][2]["streams_from"]["from"] == "pg-a");
  CHECK(snapshot.assessment.summary.find(
            "witnesses: pg-c streams from pg-a; nobody streams from pg-b: it is on its own") !=
        std::string::npos);
  CHECK(StatusText({snapshot})
            .find("Witnesses: pg-c streams from pg-a; nobody streams from pg-b\n") !=
        std::string::npos);
}

}  // namespace sbd
