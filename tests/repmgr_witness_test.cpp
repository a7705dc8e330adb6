// repmgr's witness node as a witness of the record, with no server: `repmgr.witness` parsed with
// a member's connection checks, its copy folded as one more copy (it can make the majority, and
// never stands for a node), and the store reading it beside the members.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "probes/repmgr.h"

namespace sbd {
namespace {

std::vector<std::string> Errors(const ConfigResult& result) {
  std::vector<std::string> lines;
  if (const auto* e = std::get_if<std::vector<ConfigError>>(&result)) {
    for (const ConfigError& error : *e) lines.push_back(error.ToString());
  }
  return lines;
}

const std::string kHead =
    "clusters:\n  - name: c\n    kind: repmgr\n"
    "    members:\n      - name: pg1\n        dsn: host=10.0.0.1 port=5432 user=x\n"
    "    repmgr:\n      witness:\n";

// One copy: `primary` (1 or 2) the active primary of two nodes, at `promotions`.
RepmgrCopy CopyNaming(int primary, std::int64_t promotions) {
  RepmgrCopy copy;
  for (int id = 1; id <= 2; ++id) {
    RepmgrNode node;
    node.node_id = id;
    node.node_name = "node" + std::to_string(id);
    node.type = id == primary ? "primary" : "standby";
    node.active = true;
    node.address = "10.0.0." + std::to_string(id) + ":5432";
    copy.nodes.push_back(node);
  }
  copy.promotions = promotions;
  copy.in_recovery = false;
  return copy;
}

// The witness node's copy of the same nodes: repmgrd copies repmgr.nodes to it, never
// repmgr.events, so it counts no promotion.
RepmgrCopy WitnessNaming(int primary) {
  RepmgrCopy copy = CopyNaming(primary, 0);
  copy.witness = true;
  return copy;
}

MemberSpec Member(const std::string& name, const std::string& address) {
  MemberSpec member;
  member.name = name;
  member.address = address;
  member.dsn = "host=" + address.substr(0, address.find(':')) + " port=5432";
  return member;
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

}  // namespace

TEST_CASE("config: repmgr.witness is read with a member's dsn and password checks",
          "[repmgr][config][witness]") {
  auto good =
      ParseConfig(kHead +
                      "        dsn: host=10.0.0.9 port=5432 user=splitbrain dbname=postgres\n"
                      "        password_file: /etc/sbd/witness.pass\n",
                  "r.yml");
  REQUIRE(std::holds_alternative<ValidatedConfig>(good));
  const ClusterSpec& c = std::get<ValidatedConfig>(good).clusters().at(0);
  REQUIRE(c.repmgr_witness.has_value());
  CHECK(c.repmgr_witness->name == "witness node");
  CHECK(c.repmgr_witness->address == "10.0.0.9:5432");
  CHECK(c.repmgr_witness->password_file == "/etc/sbd/witness.pass");
  CHECK(c.members.size() == 1);  // never a member

  auto none = ParseConfig(
      "clusters:\n  - name: c\n    kind: repmgr\n"
      "    members:\n      - name: pg1\n        dsn: host=10.0.0.1 port=5432 user=x\n",
      "r.yml");
  REQUIRE(std::holds_alternative<ValidatedConfig>(none));
  CHECK_FALSE(std::get<ValidatedConfig>(none).clusters().at(0).repmgr_witness.has_value());

  CHECK(Errors(ParseConfig(kHead + "        password_env: PW\n        role: x\n", "r.yml")) ==
        std::vector<std::string>{"r.yml:9:9: clusters[0].repmgr.witness.dsn: required",
                                 "r.yml:10:9: clusters[0].repmgr.witness.role: unknown key"});
  CHECK(Errors(ParseConfig(kHead + "        dsn: \"host=w port=5432 password=s3cret\"\n"
                                   "        password_file: /p\n        password_env: PW\n",
                           "r.yml")) ==
        std::vector<std::string>{
            "r.yml:10:24: clusters[0].repmgr.witness.password_file: password given both inline "
            "in dsn and in password_file",
            "r.yml:11:23: clusters[0].repmgr.witness.password_env: only one of password_file "
            "and password_env may be set",
            "r.yml:11:23: clusters[0].repmgr.witness.password_env: password given both inline "
            "in dsn and in password_env"});
  const auto bad_dsn = Errors(ParseConfig(kHead + "        dsn: host=w bogus=1\n", "r.yml"));
  REQUIRE(bad_dsn.size() == 1);
  CHECK(bad_dsn[0].find("r.yml:9:14: clusters[0].repmgr.witness.dsn: ") == 0);
  const auto scalar = Errors(
      ParseConfig("clusters:\n  - name: c\n    kind: repmgr\n"
                  "    members:\n      - name: pg1\n        dsn: host=10.0.0.1 port=5432 user=x\n"
                  "    repmgr:\n      witness: host=w\n",
                  "r.yml"));
  REQUIRE(scalar.size() == 1);
  CHECK(scalar[0].find("r.yml:8:16: clusters[0].repmgr.witness: ") == 0);
  // No error shows the password.
  for (const std::string& line : Errors(ParseConfig(
           kHead + "        dsn: \"host=w password=s3cret\"\n        password_env: PW\n",
           "r.yml"))) {
    CHECK(line.find("s3cret") == std::string::npos);
  }
}

TEST_CASE("repmgr: the witness's copy counts in the majority and is shown, never a node",
          "[repmgr][witness]") {
  // Two members whose copies disagree at the same promotion count: no majority of two.
  const std::vector<MemberSpec> members = {Member("pg1", "10.0.0.1:5432"),
                                           Member("pg2", "10.0.0.2:5432")};
  const std::vector<std::variant<RepmgrCopy, ProbeFailure>> split = {CopyNaming(1, 1),
                                                                     CopyNaming(2, 1)};
  CHECK(std::holds_alternative<ProbeFailure>(FoldRepmgrCopies(members, split)));

  // The witness (read last, standing for no node) agrees with pg1's copy: two of three. Its own
  // repmgr.events never holds a promotion (repmgrd copies only repmgr.nodes to a witness): it is
  // dated by pg1's copy, at count 1.
  std::vector<MemberSpec> with_witness = members;
  with_witness.push_back(Member("witness", ""));
  auto copies = split;
  copies.push_back(WitnessNaming(1));
  auto record = FoldRepmgrCopies(with_witness, copies);
  REQUIRE(std::holds_alternative<LockRecord>(record));
  const LockRecord& view = std::get<LockRecord>(record);
  CHECK(view.holder == "pg1");
  CHECK(view.mod_revision == 1);
  CHECK(view.endpoint == "pg1,pg2,witness");
  REQUIRE(view.dissent.size() == 1);
  CHECK(view.dissent[0] == "copy of pg2 names pg2 primary at promotion count 1");
}

TEST_CASE("repmgr: the witness's copy is dated by the member copies naming its primary",
          "[repmgr][witness]") {
  std::vector<MemberSpec> with_witness = {Member("pg1", "10.0.0.1:5432"),
                                          Member("pg2", "10.0.0.2:5432"), Member("witness", "")};
  // After a failover to pg2 (promotion 1), pg1 resumed with its own copy still at count 0.
  std::vector<std::variant<RepmgrCopy, ProbeFailure>> copies = {CopyNaming(1, 0), CopyNaming(2, 1),
                                                                WitnessNaming(2)};
  auto synced = FoldRepmgrCopies(with_witness, copies);
  REQUIRE(std::holds_alternative<LockRecord>(synced));
  CHECK(std::get<LockRecord>(synced).holder == "pg2");
  REQUIRE(std::get<LockRecord>(synced).dissent.size() == 1);
  CHECK(std::get<LockRecord>(synced).dissent[0] ==
        "copy of pg1 names pg1 primary at promotion count 0");

  // Not yet synced (witness_sync_interval): it names pg1 as only pg1's older copy does, and so is
  // behind: shown, no vote, the holder still the newest copies' pg2.
  copies.back() = WitnessNaming(1);
  auto behind = FoldRepmgrCopies(with_witness, copies);
  REQUIRE(std::holds_alternative<LockRecord>(behind));
  CHECK(std::get<LockRecord>(behind).holder == "pg2");
  REQUIRE(std::get<LockRecord>(behind).dissent.size() == 2);
  CHECK(std::get<LockRecord>(behind).dissent[1] ==
        "copy of witness names pg1 primary, as member copies at promotion count 0 do");

  // A primary no member's copy names: behind every count.
  RepmgrCopy none = WitnessNaming(1);
  none.nodes[0].active = false;
  copies.back() = none;
  auto alone = FoldRepmgrCopies(with_witness, copies);
  REQUIRE(std::holds_alternative<LockRecord>(alone));
  REQUIRE(std::get<LockRecord>(alone).dissent.size() == 2);
  CHECK(std::get<LockRecord>(alone).dissent[1] ==
        "copy of witness names (no active primary) primary, as no member's copy does");

  // The witness alone readable names no holder: its copy has nothing to be dated by.
  copies = {ProbeFailure{ProbeFailureReason::kTimeout, "down"},
            ProbeFailure{ProbeFailureReason::kTimeout, "down"}, WitnessNaming(2)};
  CHECK(std::holds_alternative<ProbeFailure>(FoldRepmgrCopies(with_witness, copies)));
}

TEST_CASE("repmgr: the store reads the witness beside the members, by the deadline",
          "[repmgr][witness]") {
  SilentListener member, witness;
  MemberSpec w = Member("witness", "127.0.0.1:" + std::to_string(witness.port));
  w.dsn = "host=127.0.0.1 port=" + std::to_string(witness.port) + " user=splitbrain";
  MemberSpec m = Member("pg1", "127.0.0.1:" + std::to_string(member.port));
  m.dsn = "host=127.0.0.1 port=" + std::to_string(member.port) + " user=splitbrain";
  RepmgrStore store({m}, "repmgr", Millis(300), EventLoop::Shared(), {}, w);
  const auto began = SteadyClock::now();
  auto record = store.Read(began + std::chrono::milliseconds(700));
  CHECK(SteadyClock::now() - began < std::chrono::milliseconds(1500));
  REQUIRE(std::holds_alternative<ProbeFailure>(record));
  const std::string& message = std::get<ProbeFailure>(record).message;
  INFO(message);
  CHECK(message ==
        "no member's repmgr record was readable: pg1: connect: no answer before the deadline; "
        "witness: connect: no answer before the deadline");
}

}  // namespace sbd
