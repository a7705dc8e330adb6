// The Redis parsers (INFO, CONFIG GET, SENTINEL master), the Sentinel majority vote, and the
// verdict on Redis claims: replid/replid2 lineage, fenced holders, drift.
#include "probes/redis_info.h"

#include <catch2/catch.hpp>

#include "detector/verdicts/verdict.h"
#include "probes/redis.h"
#include "probes/sentinel.h"

namespace sbd {
namespace {

const std::string kA = std::string(40, 'a');
const std::string kB = std::string(40, 'b');
const std::string kC = std::string(40, 'c');
const std::string kZero = std::string(40, '0');

std::string Info(const std::string& role, const std::string& replid,
                 const std::string& replid2 = kZero, const std::string& extra = "") {
  return "# Replication\r\nrole:" + role + "\r\nconnected_slaves:1\r\nmaster_replid:" + replid +
         "\r\nmaster_replid2:" + replid2 +
         "\r\nmaster_repl_offset:500\r\nsecond_repl_offset:" + (replid2 == kZero ? "-1" : "42") +
         "\r\n" + extra + "\r\n# Server\r\nredis_version:7.0.15\r\nrun_id:" + kC + "\r\n";
}

RedisReading Parsed(const std::string& text) {
  auto parsed = ParseRedisInfo(text);
  REQUIRE(std::holds_alternative<RedisReading>(parsed));
  return std::get<RedisReading>(parsed);
}

std::string Error(const std::string& text) {
  auto parsed = ParseRedisInfo(text);
  REQUIRE(std::holds_alternative<std::string>(parsed));
  return std::get<std::string>(parsed);
}

}  // namespace

TEST_CASE("redis info: a master's replication ids, offsets and run id are read", "[redis]") {
  const RedisReading r = Parsed(Info("master", kA, kB, "min_slaves_good_slaves:0"));
  CHECK(r.role == "master");
  CHECK(r.master_replid == kA);
  CHECK(r.master_replid2 == kB);
  CHECK(r.second_repl_offset == 42);
  CHECK(r.master_repl_offset == 500);
  CHECK(r.connected_replicas == 1);
  CHECK(r.run_id == kC);
  CHECK(r.good_replicas == std::optional<int>(0));
  CHECK(r.writes_blocked());
  const Claim claim = ClaimOf(r);
  CHECK(claim.holds);
  CHECK(claim.fenced);
  CHECK_FALSE(claim.writable());
  CHECK(claim.previous_lineage == kB);
  CHECK(claim.session.empty());
}

TEST_CASE("redis info: an all-zero replid2 is no previous lineage", "[redis]") {
  const RedisReading r = Parsed(Info("slave", kA));
  CHECK(r.master_replid2.empty());
  CHECK(r.second_repl_offset == -1);
  CHECK_FALSE(r.good_replicas.has_value());
  CHECK_FALSE(ClaimOf(r).holds);
}

TEST_CASE("redis info: min-replicas-to-write decides whether good replicas suffice", "[redis]") {
  RedisReading r = Parsed(Info("master", kA, kZero, "min_slaves_good_slaves:1"));
  CHECK_FALSE(r.writes_blocked());  // unknown threshold: only zero proves it blocked
  REQUIRE(ParseMinReplicasToWrite("2", r));
  CHECK(r.writes_blocked());
  CHECK_FALSE(ParseMinReplicasToWrite("-1", r));
  CHECK_FALSE(ParseMinReplicasToWrite("2x", r));
  CHECK(r.min_replicas_to_write == std::optional<int>(2));
}

TEST_CASE("redis info: malformed and hostile answers are errors, never guesses", "[redis]") {
  CHECK(Error("") == "INFO role is not master or slave: \"\"");
  CHECK(Error(Info("sentinel", kA)) == "INFO role is not master or slave: \"sentinel\"");
  CHECK(Error(Info("master", "xyz")) == "INFO master_replid is not 40 hex digits: \"xyz\"");
  CHECK(Error(Info("master", kA, "00")) == "INFO master_replid2 is not 40 hex digits");
  CHECK(Error(Info("master", kA, kZero, "connected_slaves_x\x01")) ==
        "INFO line without key:value: \"connected_slaves_x?\"");
  CHECK(Error(Info("master", kA, kZero, "min_slaves_good_slaves:99999999999999999999999")) ==
        "INFO min_slaves_good_slaves is not a number in range");
  CHECK(Error("role:master\nmaster_replid:" + kA + "\nmaster_repl_offset:-5\n") ==
        "INFO master_repl_offset is not a number in range");
  CHECK(Error(std::string(kMaxRedisInfoBytes + 1, 'x')) == "INFO answer too long");
  // The first of a repeated key wins: a later line cannot turn a replica into a master.
  CHECK(Parsed("role:slave\nrole:master\nmaster_replid:" + kA + "\n").role == "slave");
}

TEST_CASE("redis probe: error replies name a login problem or a loading server", "[redis]") {
  auto reply = [](bool error, std::string text) {
    RedisValue v;
    v.error = error;
    v.text = std::move(text);
    return v;
  };
  auto failed = RedisProbe::ReadingFrom({reply(true, "NOAUTH Authentication required."),
                                         reply(true, "NOAUTH"), reply(true, "NOAUTH")});
  REQUIRE(std::holds_alternative<ProbeFailure>(failed));
  CHECK(std::get<ProbeFailure>(failed).reason == ProbeFailureReason::kAuth);
  auto refused_config = RedisProbe::ReadingFrom(
      {reply(false, Info("master", kA)), reply(false, ""), reply(true, "NOPERM config")});
  REQUIRE(std::holds_alternative<RedisReading>(refused_config));
  CHECK_FALSE(std::get<RedisReading>(refused_config).min_replicas_to_write.has_value());
}

TEST_CASE("sentinel: the master a strict majority names holds; the others are dissent", "[redis]") {
  auto view = [](std::string address, std::int64_t epoch) {
    SentinelView v;
    v.address = std::move(address);
    v.config_epoch = epoch;
    v.flags = "master";
    return v;
  };
  MemberSpec r1;
  r1.name = "r1";
  r1.address = "127.0.0.1:7001";
  const std::vector<std::string> sentinels = {"s1:1", "s2:2", "s3:3"};
  auto record = SentinelStore::Vote(
      sentinels,
      {view("127.0.0.1:7001", 3), view("127.0.0.1:7002", 4),
       ProbeFailure{ProbeFailureReason::kRefused, "s3:3: connect: Connection refused"}},
      {r1});
  REQUIRE(std::holds_alternative<LockRecord>(record));
  const LockRecord& split = std::get<LockRecord>(record);
  CHECK(split.holder.empty());  // one of three each: no majority
  CHECK(split.dissent.size() == 3);
  record = SentinelStore::Vote(
      sentinels, {view("127.0.0.1:7001", 3), view("127.0.0.1:7001", 3), view("127.0.0.1:7002", 4)},
      {r1});
  const LockRecord& agreed = std::get<LockRecord>(record);
  CHECK(agreed.holder == "r1");
  CHECK(agreed.mod_revision == 3);
  // s3 has seen a failover the others have not: shown, not trusted.
  CHECK(agreed.dissent ==
        std::vector<std::string>{"sentinel s3:3 names 127.0.0.1:7002 at epoch 4 (flags master)",
                                 "a failover is reported by 1 of 3 sentinels, not a majority"});
  CHECK_FALSE(agreed.handover_in_progress);
  auto none = SentinelStore::Vote(sentinels, {ProbeFailure{}, ProbeFailure{}, ProbeFailure{}}, {});
  CHECK(std::holds_alternative<ProbeFailure>(none));
}

TEST_CASE("sentinel: malformed answers are errors", "[redis]") {
  using V = std::vector<std::string>;
  CHECK(std::holds_alternative<std::string>(ParseSentinelMaster({}, {"h"})));
  CHECK(std::holds_alternative<std::string>(ParseSentinelMaster({}, {"h", "0"})));
  CHECK(std::holds_alternative<std::string>(ParseSentinelMaster({"config-epoch"}, {"h", "1"})));
  CHECK(std::holds_alternative<std::string>(ParseSentinelMaster({"flags", "master"}, {"h", "1"})));
  CHECK(std::holds_alternative<std::string>(
      ParseSentinelMaster(V{"config-epoch", "-3"}, V{"h", "1"})));
  auto ok = ParseSentinelMaster(
      V{"flags", "master,failover_in_progress", "config-epoch", "7", "quorum", "2"},
      V{"10.0.0.1", "6379"});
  REQUIRE(std::holds_alternative<SentinelView>(ok));
  CHECK(std::get<SentinelView>(ok).address == "10.0.0.1:6379");
  CHECK(std::get<SentinelView>(ok).config_epoch == 7);
  CHECK(std::get<SentinelView>(ok).failover_in_progress);
}

TEST_CASE("sentinel: a config-epoch out of range is rejected with its reason", "[redis]") {
  using V = std::vector<std::string>;
  const V addr = {"10.0.0.1", "6379"};
  for (const std::string epoch :
       {"4294967296", "18446744073709551615", "99999999999999999999", "-1"}) {
    CAPTURE(epoch);
    auto parsed = ParseSentinelMaster(V{"config-epoch", epoch, "quorum", "2"}, addr);
    REQUIRE(std::holds_alternative<std::string>(parsed));
    CHECK(std::get<std::string>(parsed) ==
          "SENTINEL master: config-epoch " + epoch + " is out of range (0 to 4294967295)");
  }
  auto top = ParseSentinelMaster(V{"config-epoch", "4294967295"}, addr);
  REQUIRE(std::holds_alternative<SentinelView>(top));
  CHECK(std::get<SentinelView>(top).config_epoch == kMaxSentinelEpoch);
  CHECK(std::get<std::string>(ParseSentinelMaster(V{"config-epoch", "7x"}, addr)) ==
        "SENTINEL master: config-epoch is not a number: \"7x\"");
}

}  // namespace sbd
