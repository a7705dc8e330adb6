// repmgr's record folded from every member's copy of repmgr.nodes, with no server: the newest
// copies' majority names the primary, the others are dissent, no majority or nothing readable
// fails the read, and hostile rows (wrong types, NULLs, an enormous conninfo, a thousand rows)
// are skipped or refused with a reason, never a crash.
#include "probes/repmgr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "detector/config/config.h"

namespace sbd {
namespace {

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;
using Row = std::vector<const char*>;  // nullptr is SQL NULL

// A PGresult of 8 text columns, as libpq builds one from the wire (a cell a row leaves out is
// NULL).
ResultPtr Result(const std::vector<Row>& rows, int columns = 8) {
  ResultPtr result(PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK));
  std::vector<PGresAttDesc> attributes(columns);
  std::vector<std::string> names(columns);
  for (int i = 0; i < columns; ++i) {
    names[i] = "c" + std::to_string(i);
    attributes[i] = PGresAttDesc{};
    attributes[i].name = names[i].data();
    attributes[i].typlen = -1;
  }
  REQUIRE(PQsetResultAttrs(result.get(), columns, attributes.data()) == 1);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int i = 0; i < columns && i < static_cast<int>(rows[r].size()); ++i) {
      char* value = const_cast<char*>(rows[r][i]);
      const int length = value == nullptr ? -1 : static_cast<int>(std::strlen(value));
      REQUIRE(PQsetvalue(result.get(), static_cast<int>(r), i, value, length) == 1);
    }
  }
  return result;
}

// The three nodes of a healthy cluster whose primary is `primary` (1, 2 or 3).
std::vector<Row> Nodes(int primary, const char* promotions) {
  static const char* kConninfo[] = {"host=10.0.0.1 port=5432 user=repmgr dbname=repmgr",
                                    "host=10.0.0.2 port=5432 user=repmgr dbname=repmgr",
                                    "host=10.0.0.3 port=5432 user=repmgr dbname=repmgr"};
  static const char* kIds[] = {"1", "2", "3"};
  static const char* kNames[] = {"node1", "node2", "node3"};
  std::vector<Row> rows;
  for (int i = 0; i < 3; ++i) {
    const bool is_primary = i + 1 == primary;
    rows.push_back({kIds[i], kNames[i], is_primary ? "primary" : "standby", "t",
                    is_primary ? nullptr : kIds[primary - 1], kConninfo[i], promotions});
  }
  return rows;
}

std::vector<MemberSpec> Members() {
  std::vector<MemberSpec> members(3);
  for (int i = 0; i < 3; ++i) {
    members[i].name = "pg" + std::to_string(i + 1);
    members[i].address = "10.0.0." + std::to_string(i + 1) + ":5432";
  }
  return members;
}

RepmgrCopy Copy(const std::vector<Row>& rows) {
  auto copy = ParseRepmgrCopy(Result(rows).get());
  REQUIRE(std::holds_alternative<RepmgrCopy>(copy));
  return std::get<RepmgrCopy>(copy);
}

// The copy read from a server whose pg_is_in_recovery() is `recovery` ("t" or "f").
RepmgrCopy CopyFrom(std::vector<Row> rows, const char* recovery) {
  for (Row& row : rows) row.push_back(recovery);
  return Copy(rows);
}

ProbeFailure Unreadable(const std::string& message) {
  return ProbeFailure{ProbeFailureReason::kRefused, message};
}

// A loopback listener that never accepts: connects complete in the kernel, nothing answers.
struct SilentListener {
  int fd = -1;
  int port = 0;
  SilentListener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0);
    REQUIRE(::listen(fd, 16) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port = ntohs(address.sin_port);
  }
  ~SilentListener() { ::close(fd); }
};

MemberSpec MemberAt(const std::string& name, int port) {
  MemberSpec member;
  member.name = name;
  member.dsn = "host=127.0.0.1 port=" + std::to_string(port) + " user=splitbrain dbname=postgres";
  member.address = "127.0.0.1:" + std::to_string(port);
  return member;
}

}  // namespace

TEST_CASE("repmgr: the store on the loop gives up at the deadline on a silent member and says who",
          "[repmgr]") {
  SilentListener silent;
  int closed_port = 0;
  {
    SilentListener gone;  // a port that was free a moment ago: refused now
    closed_port = gone.port;
  }
  RepmgrStore store({MemberAt("silent", silent.port), MemberAt("closed", closed_port)}, "repmgr",
                    Millis(300));
  const auto began = SteadyClock::now();
  auto record = store.Read(began + std::chrono::milliseconds(700));
  const auto took = SteadyClock::now() - began;
  REQUIRE(std::holds_alternative<ProbeFailure>(record));
  const std::string& message = std::get<ProbeFailure>(record).message;
  INFO(message);
  CHECK(message.find("no member's repmgr record was readable: silent: connect: no answer before "
                     "the deadline; closed: connect: ") == 0);
  CHECK(took < std::chrono::milliseconds(1500));
}

TEST_CASE("repmgr: three agreeing copies name the primary mapped to a member by conninfo",
          "[repmgr]") {
  const RepmgrCopy copy = Copy(Nodes(1, "0"));
  REQUIRE(copy.nodes.size() == 3);
  CHECK(copy.nodes[0].address == "10.0.0.1:5432");
  CHECK_FALSE(copy.nodes[0].upstream_node_id.has_value());
  CHECK(copy.nodes[1].upstream_node_id == 1);
  auto record = FoldRepmgrCopies(Members(), {copy, copy, copy});
  REQUIRE(std::holds_alternative<LockRecord>(record));
  const LockRecord& view = std::get<LockRecord>(record);
  CHECK(view.holder == "pg1");
  CHECK(view.mod_revision == 0);
  CHECK(view.dissent.empty());
  CHECK(view.endpoint == "pg1,pg2,pg3");
}

TEST_CASE("repmgr: a node whose conninfo names no member is mapped by its node_name", "[repmgr]") {
  std::vector<MemberSpec> members = Members();
  members[1].name = "node2";
  members[1].address = "db2.example:5432";
  const RepmgrCopy copy = Copy(Nodes(2, "1"));
  auto record = FoldRepmgrCopies(members, {copy, copy, copy});
  REQUIRE(std::holds_alternative<LockRecord>(record));
  CHECK(std::get<LockRecord>(record).holder == "node2");
}

TEST_CASE("repmgr: a copy naming another primary at the same promotion count is dissent",
          "[repmgr]") {
  auto record =
      FoldRepmgrCopies(Members(), {Copy(Nodes(1, "2")), Copy(Nodes(1, "2")), Copy(Nodes(3, "2"))});
  REQUIRE(std::holds_alternative<LockRecord>(record));
  const LockRecord& view = std::get<LockRecord>(record);
  CHECK(view.holder == "pg1");
  CHECK(view.mod_revision == 2);
  REQUIRE(view.dissent.size() == 1);
  CHECK(view.dissent[0] == "copy of pg3 names pg3 primary at promotion count 2");
}

TEST_CASE(
    "repmgr: the copy of a newer promotion is the record and the old primary's lineage dissent",
    "[repmgr]") {
  // A standby promoted by hand (repmgr does not fence): its copy has one more promotion; the
  // old primary and the standby still following it keep the old record.
  auto record =
      FoldRepmgrCopies(Members(), {Copy(Nodes(1, "0")), Copy(Nodes(2, "1")), Copy(Nodes(1, "0"))});
  REQUIRE(std::holds_alternative<LockRecord>(record));
  const LockRecord& view = std::get<LockRecord>(record);
  CHECK(view.holder == "pg2");
  CHECK(view.mod_revision == 1);
  CHECK(view.dissent ==
        std::vector<std::string>{"copy of pg1 names pg1 primary at promotion count 0",
                                 "copy of pg3 names pg1 primary at promotion count 0"});
}

TEST_CASE("repmgr: no majority among the newest copies fails the read and says who said what",
          "[repmgr]") {
  auto record = FoldRepmgrCopies(
      Members(), {Copy(Nodes(1, "1")), Copy(Nodes(2, "1")), Unreadable("connection refused")});
  REQUIRE(std::holds_alternative<ProbeFailure>(record));
  const ProbeFailure& failure = std::get<ProbeFailure>(record);
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(failure.message.find("no majority of the 2 copies at promotion count 1") == 0);
  CHECK(failure.message.find("copy of pg3: unreadable (refused): connection refused") !=
        std::string::npos);
}

TEST_CASE("repmgr: nothing readable fails the read; one unreadable copy is dissent", "[repmgr]") {
  auto none = FoldRepmgrCopies(Members(), {Unreadable("a"), Unreadable("b"), Unreadable("c")});
  REQUIRE(std::holds_alternative<ProbeFailure>(none));
  CHECK(std::get<ProbeFailure>(none).message ==
        "no member's repmgr record was readable: pg1: a; "
        "pg2: b; pg3: c");
  auto some =
      FoldRepmgrCopies(Members(), {Copy(Nodes(1, "0")), Copy(Nodes(1, "0")), Unreadable("down")});
  REQUIRE(std::holds_alternative<LockRecord>(some));
  CHECK(std::get<LockRecord>(some).holder == "pg1");
  CHECK(std::get<LockRecord>(some).dissent ==
        std::vector<std::string>{"copy of pg3: unreadable (refused): down"});
}

TEST_CASE("repmgr: a copy with two active primaries or none names no primary", "[repmgr]") {
  std::vector<Row> two = Nodes(1, "0");
  two[2][2] = "primary";
  std::vector<Row> none = Nodes(1, "0");
  none[0][3] = "f";
  auto record = FoldRepmgrCopies(Members(), {Copy(Nodes(1, "0")), Copy(two), Copy(none)});
  REQUIRE(std::holds_alternative<ProbeFailure>(record));
  CHECK(std::get<ProbeFailure>(record).message.find("copy of pg2 names (2 active primaries)") !=
        std::string::npos);
  CHECK(std::get<ProbeFailure>(record).message.find("copy of pg3 names (no active primary)") !=
        std::string::npos);
}

TEST_CASE("repmgr: rows of wrong types or NULLs are rejected with a reason and the rest read",
          "[repmgr]") {
  std::vector<Row> rows = Nodes(1, "0");
  rows.push_back({"abc", "x", "standby", "t", nullptr, nullptr, "0"});
  rows.push_back({"5", nullptr, "standby", "t", nullptr, nullptr, "0"});
  rows.push_back({"6", "n6", "leader", "t", nullptr, nullptr, "0"});
  rows.push_back({"7", "n7", "primary", "yes", nullptr, nullptr, "0"});
  rows.push_back({"8", "n8", "standby", "t", "1.5", nullptr, "0"});
  rows.push_back({"9", "n9", nullptr, "t", nullptr, nullptr, "0"});
  const RepmgrCopy copy = Copy(rows);
  CHECK(copy.nodes.size() == 3);
  CHECK(copy.rejected ==
        std::vector<std::string>{
            "repmgr.nodes row 4: node_id is not a positive integer",
            "repmgr.nodes row 5: node_name is empty, NULL or longer than 128 bytes",
            "repmgr.nodes row 6: type is leader", "repmgr.nodes row 7: active is not a boolean",
            "repmgr.nodes row 8: upstream_node_id is not an integer",
            "repmgr.nodes row 9: type is NULL"});
  auto record = FoldRepmgrCopies(Members(), {copy, copy, copy});
  REQUIRE(std::holds_alternative<LockRecord>(record));
  CHECK(std::get<LockRecord>(record).holder == "pg1");
  CHECK(std::get<LockRecord>(record).rejected.size() == 18);
}

TEST_CASE("repmgr: an enormous conninfo rejects its row and is never shown", "[repmgr]") {
  const std::string huge = "host=10.0.0.1 password=hunter2 " + std::string(1 << 20, 'x');
  std::vector<Row> rows = Nodes(2, "0");
  rows[0][5] = huge.c_str();
  const RepmgrCopy copy = Copy(rows);
  REQUIRE(copy.rejected.size() == 1);
  CHECK(copy.rejected[0] == "repmgr.nodes row 1: conninfo longer than 1024 bytes");
  CHECK(copy.nodes.size() == 2);
  // A conninfo of normal size with a password: the node is mapped, the password nowhere.
  std::vector<Row> with_password = Nodes(2, "0");
  with_password[1][5] = "host=10.0.0.2 port=5432 password=hunter2";
  auto record = FoldRepmgrCopies(Members(), {copy, Copy(with_password), Copy(with_password)});
  REQUIRE(std::holds_alternative<LockRecord>(record));
  const LockRecord& view = std::get<LockRecord>(record);
  CHECK(view.holder == "pg2");
  for (const auto* list : {&view.rejected, &view.dissent}) {
    for (const std::string& line : *list) CHECK(line.find("hunter2") == std::string::npos);
  }
}

TEST_CASE("repmgr: a thousand rows fail the copy's read instead of reading a part", "[repmgr]") {
  std::vector<Row> rows(1000, Row{"1", "node1", "primary", "t", nullptr, "host=a", "0"});
  auto copy = ParseRepmgrCopy(Result(rows).get());
  REQUIRE(std::holds_alternative<ProbeFailure>(copy));
  CHECK(std::get<ProbeFailure>(copy).message ==
        "more than 100 rows in repmgr.nodes: the primary cannot be told from a part");
}

TEST_CASE("repmgr: another result shape or a bad promotion count is a protocol failure",
          "[repmgr]") {
  auto shape = ParseRepmgrCopy(Result({{"1"}}, 1).get());
  REQUIRE(std::holds_alternative<ProbeFailure>(shape));
  CHECK(std::get<ProbeFailure>(shape).message == "unexpected result shape");
  for (const char* count : {"-1", "many", "99999999999999999999"}) {
    std::vector<Row> rows = Nodes(1, count);
    auto copy = ParseRepmgrCopy(Result(rows).get());
    REQUIRE(std::holds_alternative<ProbeFailure>(copy));
    CHECK(std::get<ProbeFailure>(copy).message == "unexpected promotion count");
  }
  std::vector<Row> mixed = Nodes(1, "1");
  mixed[2][6] = "2";
  CHECK(std::holds_alternative<ProbeFailure>(ParseRepmgrCopy(Result(mixed).get())));
  for (const char* recovery : {"yes", ""}) {
    std::vector<Row> rows = Nodes(1, "1");
    for (Row& row : rows) row.push_back(recovery);
    auto copy = ParseRepmgrCopy(Result(rows).get());
    REQUIRE(std::holds_alternative<ProbeFailure>(copy));
    CHECK(std::get<ProbeFailure>(copy).message == "unexpected pg_is_in_recovery value");
  }
  CHECK(CopyFrom(Nodes(1, "1"), "f").in_recovery == false);
  CHECK(CopyFrom(Nodes(1, "1"), "t").in_recovery == true);
  CHECK_FALSE(Copy(Nodes(1, "1")).in_recovery.has_value());
}

TEST_CASE("repmgr: a promotion its own copy does not record yet holds the read, for its bound",
          "[repmgr]") {
  // repmgrd promoted node2 (pg2): the server is out of recovery, its copy still names node1,
  // and node1 (resumed) is writable too. Folded as it stands, the record would name pg2 the
  // zombie; it is held back, saying why, until pg2's copy names it or the bound has passed.
  const std::vector<MemberSpec> members = Members();
  RepmgrLagClock clock;
  const WallClock::time_point t0 = WallClock::now();
  const std::vector<std::variant<RepmgrCopy, ProbeFailure>> lagging = {
      CopyFrom(Nodes(1, "0"), "f"), CopyFrom(Nodes(1, "0"), "f"), CopyFrom(Nodes(1, "0"), "t")};
  auto held = RepmgrRecordLag(members, lagging, clock, t0);
  REQUIRE(held.has_value());
  CHECK(held->reason == ProbeFailureReason::kProtocol);
  CHECK(held->message ==
        "pg2 is out of recovery but its own copy of repmgr's record names pg1 primary: repmgr "
        "writes a promotion after the server leaves recovery, so the record is not read until it "
        "names pg2 (0 ms of the 10000 ms bound)");
  held = RepmgrRecordLag(members, lagging, clock, t0 + std::chrono::seconds(4));
  REQUIRE(held.has_value());
  CHECK(held->message.find("(4000 ms of the 10000 ms bound)") != std::string::npos);
  // Past the bound (a server promoted outside repmgr never gets its row): read as it stands.
  CHECK_FALSE(RepmgrRecordLag(members, lagging, clock, t0 + std::chrono::seconds(11)));

  SECTION("once the new primary's copy names it, nothing is held and the clock forgets it") {
    RepmgrLagClock fresh;
    REQUIRE(RepmgrRecordLag(members, lagging, fresh, t0));
    const std::vector<std::variant<RepmgrCopy, ProbeFailure>> recorded = {
        CopyFrom(Nodes(1, "0"), "f"), CopyFrom(Nodes(2, "1"), "f"), CopyFrom(Nodes(1, "0"), "t")};
    CHECK_FALSE(RepmgrRecordLag(members, recorded, fresh, t0 + std::chrono::seconds(1)));
    CHECK(fresh.since.empty());
    auto record = FoldRepmgrCopies(members, recorded);
    REQUIRE(std::holds_alternative<LockRecord>(record));
    CHECK(std::get<LockRecord>(record).holder == "pg2");
    // A later lag starts its own bound.
    auto again = RepmgrRecordLag(members, lagging, fresh, t0 + std::chrono::seconds(30));
    REQUIRE(again.has_value());
    CHECK(again->message.find("(0 ms of the") != std::string::npos);
  }
  SECTION(
      "a primary naming itself, standbys, unreadable copies and unknown recovery hold nothing") {
    RepmgrLagClock fresh;
    const std::vector<std::variant<RepmgrCopy, ProbeFailure>> steady = {
        CopyFrom(Nodes(1, "0"), "f"), CopyFrom(Nodes(1, "0"), "t"), Copy(Nodes(1, "0")),
        Unreadable("connect: refused")};
    CHECK_FALSE(RepmgrRecordLag(members, steady, fresh, t0));
    CHECK(fresh.since.empty());
  }
}

TEST_CASE("config: a repmgr cluster reads PostgreSQL members and its metadata database",
          "[repmgr][config]") {
  const std::string members =
      "    members:\n      - name: pg1\n        dsn: host=127.0.0.1 port=5433 user=x\n";
  auto plain = ParseConfig("clusters:\n  - name: c\n    kind: repmgr\n" + members, "r.yml");
  REQUIRE(std::holds_alternative<ValidatedConfig>(plain));
  CHECK(std::get<ValidatedConfig>(plain).clusters().at(0).repmgr_database == "repmgr");
  auto named = ParseConfig(
      "clusters:\n  - name: c\n    kind: repmgr\n    repmgr:\n      database: meta\n" + members,
      "r.yml");
  REQUIRE(std::holds_alternative<ValidatedConfig>(named));
  CHECK(std::get<ValidatedConfig>(named).clusters().at(0).repmgr_database == "meta");
  auto bad = ParseConfig(
      "clusters:\n  - name: c\n    kind: repmgr\n    repmgr:\n      database: \"\"\n"
      "      extra: 1\n" +
          members,
      "r.yml");
  REQUIRE(std::holds_alternative<std::vector<ConfigError>>(bad));
  std::vector<std::string> lines;
  for (const ConfigError& e : std::get<std::vector<ConfigError>>(bad))
    lines.push_back(e.ToString());
  INFO(lines.size());
  CHECK(lines.size() == 2);
}

TEST_CASE("repmgr discovery: nodes come from conninfo host and port, never its password",
          "[repmgr][discovery]") {
  std::vector<Row> rows = {
      {"1", "node1", "primary", "t", nullptr,
       "host=10.0.0.1 port=5433 user=repmgr password=s3cret dbname=repmgr sslmode=require", "0"},
      {"2", "node2", "standby", "t", "1", "host=db2.example port=5432 password='s3cret'", "0"},
      {"3", "witness", "witness", "t", "1", "host=10.0.0.9 port=5432", "0"},
      {"4", "node4", "standby", "f", "1", "host=fe80::4", "0"}};
  const RepmgrCopy copy = CopyFrom(rows, "f");
  DiscoverySpec discovery;
  discovery.dsn = "user=splitbrain dbname=postgres";
  discovery.password_file = "/etc/sbd/pass";
  std::vector<MemberSpec> readers = {MemberAt("seed", 1)};
  const RepmgrDiscovery found = DiscoverRepmgrNodes({}, readers, {copy}, discovery);
  CHECK(found.rejected.empty());
  REQUIRE(found.registered.size() == 3);  // the witness is no member
  CHECK(found.registered[0].name == "node1");
  CHECK(found.registered[0].conn_url == "postgres://10.0.0.1:5433");
  CHECK(found.registered[1].conn_url == "postgres://db2.example:5432");
  CHECK(found.registered[2].conn_url == "postgres://[fe80::4]:5432");
  REQUIRE(found.copies.size() == 3);
  for (const MemberSpec& member : found.copies) {
    INFO(member.dsn);
    CHECK(member.discovered);
    CHECK(member.dsn.find("s3cret") == std::string::npos);
    CHECK(member.dsn.find("sslmode") == std::string::npos);
    CHECK(member.dsn.find("user=splitbrain dbname=postgres") != std::string::npos);
    CHECK(member.password_file == discovery.password_file);
  }
  CHECK(found.copies[0].dsn.find("host='10.0.0.1' port='5433'") == 0);
  CHECK(found.copies[0].address == "10.0.0.1:5433");
}

TEST_CASE("repmgr discovery: hostile conninfo is skipped with a reason; the cap holds the copies",
          "[repmgr][discovery]") {
  const std::string huge_host = "host=" + std::string(300, 'h') + " port=5432";
  std::vector<Row> rows = {
      {"1", "node1", "primary", "t", nullptr, "host=10.0.0.1 port=5432", "0"},
      {"2", "node2", "standby", "t", "1", "host=/var/run/postgresql port=5432", "0"},
      {"3", "node3", "standby", "t", "1", "host=10.0.0.3 port=99999", "0"},
      {"4", "node4", "standby", "t", "1", "dbname=repmgr", "0"},
      {"5", "node5", "standby", "t", "1", "host='bad host' port=5432", "0"},
      {"6", "node6", "standby", "t", "1", huge_host.c_str(), "0"},
      {"7", "node7", "standby", "t", "1", "this is not = a conninfo '", "0"},
      {"8", "ev il", "standby", "t", "1", "host=10.0.0.8", "0"},
      {"9", "node9", "standby", "t", "1", "host=10.0.0.9", "0"},
      {"10", "node10", "standby", "t", "1", "host=10.0.0.10", "0"},
      {"11", "node1", "standby", "t", "1", "host=10.0.0.11", "0"}};  // a name taken
  const RepmgrCopy copy = CopyFrom(rows, "f");
  DiscoverySpec discovery;
  discovery.max_members = 2;
  std::vector<MemberSpec> configured = {MemberAt("pg9", 1)};
  configured[0].address = "10.0.0.9:5432";  // node9 is configured, by address
  const RepmgrDiscovery found =
      DiscoverRepmgrNodes(configured, {configured[0]}, {copy, Unreadable("down")}, discovery);
  std::vector<std::string> names;
  for (const DcsMember& member : found.registered) names.push_back(member.name);
  CHECK(names == std::vector<std::string>{"node1", "node10"});
  REQUIRE(found.copies.size() == 2);
  INFO(found.rejected.size());
  REQUIRE(found.rejected.size() == 7);
  CHECK(found.rejected[0] ==
        "repmgr.nodes node 2 node2: host \"/var/run/postgresql\" is not a host name or an IP "
        "address: "
        "not discovered");
  CHECK(found.rejected[1] ==
        "repmgr.nodes node 3 node3: port \"99999\" is not 1 to 65535: not discovered");
  CHECK(found.rejected[2] == "repmgr.nodes node 4 node4: conninfo names no host: not discovered");
  for (const std::string& why : found.rejected) CHECK(why.size() < 300);
  // Cut to the cap: a third discovered node is registered (the scheduler names it not probed),
  // its copy not read.
  discovery.max_members = 1;
  const RepmgrDiscovery capped =
      DiscoverRepmgrNodes(configured, {configured[0]}, {copy}, discovery);
  CHECK(capped.registered.size() == 2);
  CHECK(capped.copies.size() == 1);
}

TEST_CASE("config: repmgr discover: true lists no member but needs seeds; the dsn is hostless",
          "[repmgr][config][discovery]") {
  const std::string head = "clusters:\n  - name: c\n    kind: repmgr\n    discover: true\n";
  auto seeded = ParseConfig(head +
                                "    discovery:\n      dsn: user=splitbrain dbname=postgres\n"
                                "      password_env: PGPW\n      max_members: 5\n"
                                "    repmgr:\n      seeds: [\"127.0.0.1:5432\", \"db2:6432\"]\n",
                            "r.yml");
  REQUIRE(std::holds_alternative<ValidatedConfig>(seeded));
  const ClusterSpec& c = std::get<ValidatedConfig>(seeded).clusters().at(0);
  CHECK(c.discovery.enabled);
  CHECK(c.discovery.max_members == 5);
  CHECK(c.repmgr_seeds == std::vector<std::string>{"127.0.0.1:5432", "db2:6432"});
  auto errors = [](const ConfigResult& result) {
    std::vector<std::string> lines;
    if (const auto* e = std::get_if<std::vector<ConfigError>>(&result)) {
      for (const ConfigError& error : *e) lines.push_back(error.ToString());
    }
    return lines;
  };
  CHECK(errors(ParseConfig(head, "r.yml")) ==
        std::vector<std::string>{"r.yml:2:5: clusters[0].repmgr.seeds: required with discover: "
                                 "true and no member listed: where the record is first read"});
  CHECK(errors(ParseConfig(head + "    discovery:\n      dsn: host=x password=p\n"
                                  "    repmgr:\n      seeds: [\"nohost\"]\n",
                           "r.yml")) ==
        std::vector<std::string>{
            "r.yml:6:12: clusters[0].discovery.dsn: must not set host: discovered members take "
            "host and port from repmgr.nodes' conninfo",
            "r.yml:6:12: clusters[0].discovery.dsn: must not hold a password: use password_file "
            "or password_env",
            "r.yml:8:15: clusters[0].repmgr.seeds[0]: expected host:port"});
}

}  // namespace sbd
