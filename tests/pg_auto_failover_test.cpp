// The pg_auto_failover kind's pure parts (issue 28): the monitor's rows folded into the
// engine's record (holder, epoch, handover, hostile rows), the handover's bound, and the
// config block.
#include "probes/pg_auto_failover.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "tests/support/config_errors.h"

namespace {

using sbd::MonitorRow;

sbd::MemberSpec Member(const std::string& name, const std::string& address) {
  sbd::MemberSpec member;
  member.name = name;
  member.address = address;
  return member;
}

const std::vector<sbd::MemberSpec> kMembers = {Member("pg1", "10.0.0.1:5432"),
                                               Member("pg2", "10.0.0.2:5432")};

MonitorRow Node(const std::string& id, const std::string& name, const std::string& host,
                const std::string& goal, const std::string& reported,
                const std::string& newest_event = "42") {
  return {newest_event, id, name, host, "5432", goal, reported, "0/3000060"};
}

sbd::LockRecord Fold(const std::vector<MonitorRow>& rows) {
  auto record = sbd::FoldMonitorNodes(rows, kMembers, sbd::PgAutoFailoverSpec{});
  if (auto* failure = std::get_if<sbd::ProbeFailure>(&record)) FAIL(failure->message);
  return std::get<sbd::LockRecord>(record);
}

sbd::ConfigResult Parse(const std::string& block) {
  return sbd::ParseConfig("clusters:\n  - name: orders\n    kind: pg_auto_failover\n" + block +
                              "    members:\n      - name: a\n        dsn: host=127.0.0.1 "
                              "port=5432 user=splitbrain\n",
                          "paf.yml");
}

using sbd::testing::ConfigErrorLines;

}  // namespace

TEST_CASE("pg_auto_failover: the node with a primary goal holds, named by member address",
          "[pg_auto_failover]") {
  const sbd::LockRecord view = Fold({Node("1", "node_1", "10.0.0.1", "primary", "primary"),
                                     Node("2", "node_2", "10.0.0.2", "secondary", "secondary")});
  CHECK(view.holder == "pg1");
  CHECK(view.mod_revision == 42);
  CHECK_FALSE(view.handover_in_progress);
  CHECK(view.rejected.empty());
  CHECK(view.dissent.empty());
  REQUIRE(view.members.size() == 2);
  CHECK(view.members[1].name == "pg2");
  CHECK(view.members[1].role == "secondary");
}

TEST_CASE("pg_auto_failover: every primary-like goal of 2.0 names the holder, no other does",
          "[pg_auto_failover]") {
  for (const char* state :
       {"single", "wait_primary", "primary", "join_primary", "apply_settings"}) {
    INFO(state);
    CHECK(Fold({Node("1", "pg2", "10.9.9.9", state, state)}).holder == "pg2");
  }
  for (const char* state : {"demoted", "secondary", "catchingup", "maintenance", "draining",
                            "demote_timeout", "wait_standby", "report_lsn", "dropped", "init"}) {
    INFO(state);
    CHECK(Fold({Node("1", "pg2", "10.9.9.9", state, state)}).holder.empty());
  }
}

TEST_CASE("pg_auto_failover: a failover in flight is a handover naming the promoted node",
          "[pg_auto_failover]") {
  const sbd::LockRecord view =
      Fold({Node("1", "node_1", "10.0.0.1", "demote_timeout", "primary"),
            Node("2", "node_2", "10.0.0.2", "stop_replication", "prepare_promotion")});
  CHECK(view.holder == "pg2");
  CHECK(view.handover_in_progress);
  REQUIRE(view.dissent.size() == 1);
  CHECK(view.dissent[0] == "pg1 reports primary while the monitor's goal for it is demote_timeout");
}

TEST_CASE("pg_auto_failover: an old primary still reporting primary keeps the handover open",
          "[pg_auto_failover]") {
  const sbd::LockRecord view =
      Fold({Node("1", "node_1", "10.0.0.1", "demoted", "primary"),
            Node("2", "node_2", "10.0.0.2", "wait_primary", "wait_primary")});
  CHECK(view.holder == "pg2");
  CHECK(view.handover_in_progress);
}

TEST_CASE("pg_auto_failover: two primary goals name no holder and say why", "[pg_auto_failover]") {
  const sbd::LockRecord view = Fold({Node("1", "node_1", "10.0.0.1", "primary", "primary"),
                                     Node("2", "node_2", "10.0.0.2", "single", "single")});
  CHECK(view.holder.empty());
  REQUIRE(view.rejected.size() == 1);
  CHECK(view.rejected[0] == "several nodes have a primary-like goal (pg1, pg2): no holder named");
}

TEST_CASE("pg_auto_failover: hostile rows are skipped with a reason, the rest still read",
          "[pg_auto_failover]") {
  MonitorRow null_name = Node("3", "x", "10.0.0.3", "primary", "primary");
  null_name[2].reset();
  MonitorRow bad_port = Node("4", "y", "10.0.0.4", "primary", "primary");
  bad_port[4] = "99999";
  MonitorRow text_id = Node("abc", "z", "10.0.0.5", "primary", "primary");
  MonitorRow binary_name = Node("6", std::string("ev\x01il", 5), "10.0.0.6", "primary", "primary");
  const sbd::LockRecord view = Fold({Node("1", "node_1", "10.0.0.1", "secondary", "secondary"),
                                     Node("2", "node_2", "10.0.0.2", "primary", "primary", "x"),
                                     Node("7", "w", "10.0.0.7", "leader", "primary"),
                                     Node("8", "v", "10.0.0.8", "secondary", std::string(300, 'q')),
                                     null_name, bad_port, text_id, binary_name});
  CHECK(view.holder == "pg2");
  CHECK(view.rejected == std::vector<std::string>{
                             "the newest event id is not a number: 'x'",
                             "node 7: goalstate is not a pg_auto_failover 2.0 state: 'leader'",
                             "node 8: reportedstate is not a pg_auto_failover 2.0 state: a value "
                             "of 300 bytes (not shown)",
                             "node 3: nodename is not a printable name: NULL",
                             "node 4: nodeport is not a port: '99999'",
                             "a node's nodeid is not a positive integer: 'abc'",
                             "node 6: nodename is not a printable name: a value of 5 bytes (not "
                             "shown)"});
  CHECK(view.mod_revision == 42);
}

TEST_CASE("pg_auto_failover: a group without nodes reads as no holder, not a failure",
          "[pg_auto_failover]") {
  const sbd::LockRecord view = Fold({{std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                      std::nullopt, std::nullopt, std::nullopt, std::nullopt}});
  CHECK(view.holder.empty());
  CHECK(view.members.empty());
  CHECK(view.rejected.empty());
  CHECK(view.mod_revision == 0);
}

TEST_CASE("pg_auto_failover: more than a thousand rows or a wrong shape fail the read",
          "[pg_auto_failover]") {
  std::vector<MonitorRow> rows;
  for (int i = 1; i <= 1001; ++i) {
    rows.push_back(
        Node(std::to_string(i), "n" + std::to_string(i), "10.1.0.1", "secondary", "secondary"));
  }
  auto record = sbd::FoldMonitorNodes(rows, kMembers, sbd::PgAutoFailoverSpec{});
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(record));
  CHECK(std::get<sbd::ProbeFailure>(record).message ==
        "more than 1000 nodes in formation default group 0: the holder cannot be told");
  rows.pop_back();
  CHECK(std::holds_alternative<sbd::LockRecord>(
      sbd::FoldMonitorNodes(rows, kMembers, sbd::PgAutoFailoverSpec{})));
  auto short_row = sbd::FoldMonitorNodes({{"1", "2"}}, kMembers, sbd::PgAutoFailoverSpec{});
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(short_row));
  CHECK(std::get<sbd::ProbeFailure>(short_row).reason == sbd::ProbeFailureReason::kProtocol);
}

TEST_CASE("pg_auto_failover: the handover clock names the previous holder and ends at its bound",
          "[pg_auto_failover]") {
  sbd::MonitorHandoverClock clock;
  const auto t0 = sbd::WallClock::now();
  sbd::LockRecord steady = Fold({Node("1", "node_1", "10.0.0.1", "primary", "primary")});
  sbd::TrackMonitorHandover(steady, clock, t0);
  CHECK(steady.previous_holder.empty());
  CHECK(steady.handover_bound == sbd::kPgAutoFailoverHandoverBound);

  const std::vector<MonitorRow> moving = {
      Node("1", "node_1", "10.0.0.1", "demoted", "primary"),
      Node("2", "node_2", "10.0.0.2", "wait_primary", "wait_primary")};
  sbd::LockRecord first = Fold(moving);
  sbd::TrackMonitorHandover(first, clock, t0 + std::chrono::seconds(1));
  CHECK(first.previous_holder == "pg1");
  CHECK(first.holder_changed_at == t0 + std::chrono::seconds(1));
  CHECK(first.handover_in_progress);

  sbd::LockRecord within = Fold(moving);
  sbd::TrackMonitorHandover(within, clock, t0 + std::chrono::seconds(11));
  CHECK(within.handover_in_progress);
  CHECK(within.holder_changed_at == t0 + std::chrono::seconds(1));

  sbd::LockRecord past = Fold(moving);
  sbd::TrackMonitorHandover(past, clock, t0 + std::chrono::seconds(12));
  CHECK_FALSE(past.handover_in_progress);
  CHECK(past.dissent.back() ==
        "the monitor has reported a transition for 11000 ms, past the 10000 ms bound: no "
        "longer a handover");
}

TEST_CASE("config: a pg_auto_failover cluster reads its monitor, formation and group",
          "[config][pg_auto_failover]") {
  const auto result = Parse(
      "    pg_auto_failover:\n      monitor: host=127.0.0.1 port=6000 user=autoctl_node "
      "dbname=pg_auto_failover\n      monitor_password_env: PAF_PASSWORD\n"
      "      formation: sales\n      group: 2\n");
  INFO(ConfigErrorLines(result).size());
  REQUIRE(std::holds_alternative<sbd::ValidatedConfig>(result));
  const sbd::ClusterSpec& c = std::get<sbd::ValidatedConfig>(result).clusters().at(0);
  CHECK(c.kind == "pg_auto_failover");
  CHECK(c.pg_auto_failover.monitor.address == "127.0.0.1:6000");
  CHECK(c.pg_auto_failover.monitor.password_env == std::optional<std::string>("PAF_PASSWORD"));
  CHECK(c.pg_auto_failover.formation == "sales");
  CHECK(c.pg_auto_failover.group == 2);
  const auto defaults = Parse("    pg_auto_failover:\n      monitor: host=m port=6000\n");
  REQUIRE(std::holds_alternative<sbd::ValidatedConfig>(defaults));
  const sbd::ClusterSpec& d = std::get<sbd::ValidatedConfig>(defaults).clusters().at(0);
  CHECK(d.pg_auto_failover.formation == "default");
  CHECK(d.pg_auto_failover.group == 0);
}

TEST_CASE("config: a pg_auto_failover block reports each mistake at its key",
          "[config][pg_auto_failover]") {
  CHECK(ConfigErrorLines(Parse("")) ==
        std::vector<std::string>{"paf.yml:2:5: clusters[0].pg_auto_failover: required"});
  CHECK(ConfigErrorLines(Parse("    pg_auto_failover:\n      formation: ''\n      group: -1\n")) ==
        std::vector<std::string>{
            "paf.yml:5:7: clusters[0].pg_auto_failover.monitor: required",
            "paf.yml:5:18: clusters[0].pg_auto_failover.formation: expected 1 to 63 bytes",
            "paf.yml:6:14: clusters[0].pg_auto_failover.group: expected a whole number from 0 to "
            "1000000"});
}

TEST_CASE("pg_auto_failover discovery: unnamed nodes are offered by nodehost and nodeport",
          "[pg_auto_failover][discovery]") {
  MonitorRow hostile_host = Node("3", "node_3", "evil/../host", "secondary", "secondary");
  MonitorRow long_host = Node("4", "node_4", std::string(254, 'h'), "secondary", "secondary");
  MonitorRow v6 = Node("5", "node_5", "fd00::5", "secondary", "secondary");
  v6[4] = "6432";
  const std::vector<MonitorRow> rows = {Node("1", "node_1", "10.0.0.1", "primary", "primary"),
                                        Node("2", "node_2", "10.0.0.9", "secondary", "secondary"),
                                        hostile_host, long_host, v6};
  auto record = sbd::FoldMonitorNodes(rows, kMembers, sbd::PgAutoFailoverSpec{}, true);
  REQUIRE(std::holds_alternative<sbd::LockRecord>(record));
  const sbd::LockRecord& view = std::get<sbd::LockRecord>(record);
  CHECK(view.holder == "pg1");
  REQUIRE(view.members.size() == 5);
  CHECK(view.members[0].name == "pg1");
  CHECK(view.members[0].conn_url.empty());  // a configured member: nothing to discover
  CHECK(view.members[1].name == "node_2");
  CHECK(view.members[1].conn_url == "postgres://10.0.0.9:5432");
  CHECK(view.members[2].conn_url.empty());
  CHECK(view.members[3].conn_url.empty());
  CHECK(view.members[4].conn_url == "postgres://[fd00::5]:6432");
  REQUIRE(view.rejected.size() == 2);
  CHECK(view.rejected[0] ==
        "node node_3: host \"evil/../host\" is not a host name or an IP address: not discovered");
  CHECK(view.rejected[1].find("node node_4: host \"hhhh") == 0);
  CHECK(view.rejected[1].size() < 200);
  // Without discover, nothing is offered and nothing rejected for it.
  auto plain = sbd::FoldMonitorNodes(rows, kMembers, sbd::PgAutoFailoverSpec{});
  REQUIRE(std::holds_alternative<sbd::LockRecord>(plain));
  for (const auto& member : std::get<sbd::LockRecord>(plain).members)
    CHECK(member.conn_url.empty());
  CHECK(std::get<sbd::LockRecord>(plain).rejected.empty());
}

TEST_CASE("config: pg_auto_failover discover: true may list no member", "[config][discovery]") {
  const std::string monitor = "    pg_auto_failover:\n      monitor: host=m port=6000\n";
  const auto result = sbd::ParseConfig(
      "clusters:\n  - name: orders\n    kind: pg_auto_failover\n    discover: true\n"
      "    discovery:\n      dsn: user=splitbrain dbname=postgres\n      expire_after: 2m\n" +
          monitor,
      "paf.yml");
  INFO(ConfigErrorLines(result).size());
  REQUIRE(std::holds_alternative<sbd::ValidatedConfig>(result));
  const sbd::ClusterSpec& c = std::get<sbd::ValidatedConfig>(result).clusters().at(0);
  CHECK(c.discovery.enabled);
  CHECK(c.discovery.expire_after == std::chrono::minutes(2));
  CHECK(c.members.empty());
  CHECK(ConfigErrorLines(sbd::ParseConfig(
            "clusters:\n  - name: orders\n    kind: pg_auto_failover\n" + monitor, "paf.yml")) ==
        std::vector<std::string>{"paf.yml:2:5: clusters[0].members: must list at least one member "
                                 "or set discover: true"});
}
