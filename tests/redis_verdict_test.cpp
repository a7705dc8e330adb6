// The verdict on Redis claims: masters linked by replid/replid2 are one lineage, unrelated
// masters are drift, a master refusing writes for want of replicas is a fenced holder.
#include <catch2/catch.hpp>

#include "detector/verdicts/verdict.h"
#include "probes/sentinel.h"
#include "suppressors/transition.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;

const std::string kX = std::string(40, 'a');
const std::string kY = std::string(40, 'b');
const std::string kZ = std::string(40, 'c');
const SteadyClock::time_point kT0 = SteadyClock::time_point(std::chrono::hours(1));

ClusterSpec Group(const std::vector<std::string>& members) {
  ClusterSpec spec;
  spec.name = "cache";
  spec.kind = "redis";
  for (const auto& name : members) {
    MemberSpec member;
    member.name = name;
    spec.members.push_back(member);
  }
  return spec;
}

Observation Redis(const std::string& member, const std::string& role, const std::string& replid,
                  const std::string& replid2 = "", bool blocked = false) {
  Observation obs;
  obs.member = member;
  obs.window = ReadingWindow{WallClock::now(), kT0, kT0 + milliseconds(5)};
  RedisReading r;
  r.role = role;
  r.master_replid = replid;
  r.master_replid2 = replid2;
  if (blocked) {
    r.good_replicas = 0;
    r.min_replicas_to_write = 1;
  }
  obs.result = r;
  return obs;
}

Assessment Judge(const ClusterSpec& spec, const std::vector<Observation>& round, bool confirmed,
                 const std::string& holder) {
  ClusterHistory history;
  for (const auto& obs : round)
    RecordObservation(history.members[obs.member], obs, WallClock::now());
  LockRecord record;
  record.holder = holder;
  const LockRecordResult dcs = record;
  history.lineage = ChooseLineage(spec, history, &dcs);
  return Assess(spec, round, history, confirmed, &dcs);
}

SentinelView Names(const std::string& address, std::int64_t epoch, bool failover = false) {
  SentinelView v;
  v.address = address;
  v.config_epoch = epoch;
  v.flags = failover ? "master,failover_in_progress" : "master";
  v.failover_in_progress = failover;
  return v;
}

// The record four sentinels make of group m/r2: `answers` in the order s1..s4.
LockRecord SentinelRecord(const std::vector<std::variant<SentinelView, ProbeFailure>>& answers,
                          int* minority = nullptr) {
  MemberSpec m;
  m.name = "m";
  m.address = "127.0.0.1:7001";
  MemberSpec r2;
  r2.name = "r2";
  r2.address = "127.0.0.1:7002";
  std::vector<std::string> sentinels;
  for (size_t i = 1; i <= answers.size(); ++i) sentinels.push_back("s" + std::to_string(i) + ":1");
  auto record = SentinelStore::Vote(sentinels, answers, {m, r2}, minority);
  REQUIRE(std::holds_alternative<LockRecord>(record));
  LockRecord view = std::get<LockRecord>(record);
  view.handover_bound = kSentinelHandoverBound;
  return view;
}

// History in which `member` has been a writable master since `since`.
void WritableSince(ClusterHistory& history, const std::string& member, const std::string& replid,
                   WallClock::time_point since) {
  RecordObservation(history.members[member], Redis(member, "master", replid, kX), since);
}

}  // namespace

TEST_CASE("redis verdict: a replica promoted by hand is the zombie of a split brain",
          "[redis][verdict]") {
  const ClusterSpec spec = Group({"r1", "r2", "r3"});
  // r2 ran REPLICAOF NO ONE: a new replid, the old one as replid2.
  const std::vector<Observation> round = {Redis("r1", "master", kX), Redis("r2", "master", kZ, kX),
                                          Redis("r3", "slave", kX)};
  CHECK(ConfirmedWritable(round, kX) == std::vector<std::string>{"r1", "r2"});
  const Assessment a = Judge(spec, round, true, "r1");
  CHECK(a.verdict == Verdict::kSplitBrain);
  CHECK(a.writable == std::vector<std::string>{"r1", "r2"});
  CHECK(a.zombies == std::vector<std::string>{"r2"});
  CHECK(a.drift.empty());
}

TEST_CASE("redis verdict: masters of unrelated replication ids are drift, not split brain",
          "[redis][verdict]") {
  const ClusterSpec spec = Group({"a1", "a2", "b1"});
  const std::vector<Observation> round = {Redis("a1", "master", kX), Redis("a2", "slave", kX),
                                          Redis("b1", "master", kY)};
  CHECK(ConfirmedWritable(round, kX).empty());
  const Assessment a = Judge(spec, round, false, "a1");
  CHECK(a.verdict == Verdict::kDrift);
  CHECK(a.drift == std::vector<std::string>{"b1"});
}

TEST_CASE("redis verdict: a master fenced by min-replicas-to-write is warned, never paged",
          "[redis][verdict]") {
  const ClusterSpec spec = Group({"old", "new", "r3"});
  const std::vector<Observation> round = {Redis("old", "master", kX, "", true),
                                          Redis("new", "master", kY, kX),
                                          Redis("r3", "slave", kY, kX)};
  CHECK(ConfirmedWritable(round, kY).empty());
  const Assessment a = Judge(spec, round, false, "new");
  CHECK(a.verdict == Verdict::kSuspected);
  CHECK(a.fenced == std::vector<std::string>{"old"});
  CHECK(a.writable == std::vector<std::string>{"new"});
  CHECK(a.zombies.empty());
  CHECK(a.summary.find("fenced holder") != std::string::npos);
}

TEST_CASE("redis verdict: lineage links follow a chain of failovers", "[redis][verdict]") {
  LineageLinks links;
  links.Link(kY, kX);
  links.Link(kZ, kY);
  CHECK(links.Same(kX, kZ));
  CHECK_FALSE(links.Same(kX, std::string(40, 'd')));
  links.Link(kX, "");  // nothing to join
  CHECK(links.Same(kX, kX));
}

TEST_CASE("redis handover: the store's own failover excuses a double master for its bound only",
          "[redis][verdict]") {
  const auto now = WallClock::now();
  const Millis ttl(5000);
  ClusterHistory history;
  history.members["old"].last_ok = now;
  LockRecord record;
  record.holder = "new";
  record.mod_revision = 4;
  record.previous_holder = "old";
  record.holder_changed_at = now - std::chrono::seconds(3);
  record.handover_bound = std::chrono::seconds(20);
  const std::vector<std::string> both = {"new", "old"};
  const auto excused = DescribeHandover(record, both, history, now, ttl);
  REQUIRE(excused.has_value());
  CHECK(excused->from_candidate);
  CHECK(excused->from_store);
  CHECK(excused->summary.find("old held the lock until 3000 ms ago (epoch 4)") !=
        std::string::npos);
  // Past the bound, Sentinel should have demoted it: a split brain.
  CHECK_FALSE(DescribeHandover(record, both, history, now + std::chrono::seconds(18), ttl));
  // Back from being unreadable around the change (frozen, partitioned): never excused.
  history.members["old"].last_unanswered = now - std::chrono::seconds(4);
  CHECK_FALSE(DescribeHandover(record, both, history, now, ttl));
  // A member the store never named (a replica promoted by hand) is not excused either...
  history.members["old"].last_unanswered.reset();
  CHECK_FALSE(DescribeHandover(record, {"new", "stranger"}, history, now, ttl));
  // ...unless the store says it is moving the lock right now.
  record.handover_in_progress = true;
  CHECK(DescribeHandover(record, {"new", "stranger"}, history, now, ttl).has_value());
  // ...but not when a writable member, holder included, was unreadable within the TTL.
  history.members["new"].last_unanswered = now - std::chrono::seconds(1);
  CHECK_FALSE(DescribeHandover(record, {"new", "stranger"}, history, now, ttl));
  // Without the holder among the writable, nothing is explained.
  CHECK_FALSE(DescribeHandover(record, {"old", "stranger"}, history, now, ttl));
}

TEST_CASE(
    "redis handover: a failover only a minority of sentinels reports excuses no replica "
    "promoted by hand beyond the time the others take to hear of it",
    "[redis][verdict]") {
  const auto now = WallClock::now();
  const Millis ttl(5000);
  ClusterHistory history;
  RecordObservation(history.members["m"], Redis("m", "master", kX), now - std::chrono::hours(1));
  WritableSince(history, "r2", kZ, now - std::chrono::seconds(1));
  const std::vector<std::string> both = {"m", "r2"};
  // Three sentinels name m; a fourth (another group's config) names a master at a far newer
  // epoch, in the middle of a failover of its own.
  int minority = 0;
  const LockRecord dissenting =
      SentinelRecord({Names("127.0.0.1:7001", 2), Names("127.0.0.1:7001", 2),
                      Names("127.0.0.1:7001", 2), Names("10.9.9.9:6379", 1000000, true)},
                     &minority);
  CHECK(dissenting.holder == "m");
  CHECK(minority == 1);
  CHECK_FALSE(dissenting.handover_in_progress);
  CHECK(dissenting.dissent.back() == "a failover is reported by 1 of 4 sentinels, not a majority");
  CHECK_FALSE(DescribeHandover(dissenting, both, history, now, ttl));
  // The store has read that report for longer than the others take to hear of a failover
  // (it was there before r2 was promoted): not trusted.
  SentinelStore::HandoverClock clock;
  clock.minority_since = now - kSentinelAgreementBound - Millis(1);
  LockRecord steady = dissenting;
  SentinelStore::BoundHandover(steady, minority, clock, now);
  CHECK_FALSE(steady.handover_in_progress);
  CHECK(steady.dissent.back().find(" ms, is not trusted: a minority is believed for 3000 ms at "
                                   "most") != std::string::npos);
  CHECK_FALSE(DescribeHandover(steady, both, history, now, ttl));
  // And the verdict on that round stays the page.
  const ClusterSpec spec = Group({"m", "r2"});
  const std::vector<Observation> round = {Redis("m", "master", kX), Redis("r2", "master", kZ, kX)};
  const LockRecordResult dcs = steady;
  CHECK(Assess(spec, round, history, true, &dcs).verdict == Verdict::kSplitBrain);
  // A fresh report (a leader that has just promoted r2) is believed for that time only.
  SentinelStore::HandoverClock fresh_clock;
  LockRecord fresh = dissenting;
  SentinelStore::BoundHandover(fresh, minority, fresh_clock, now);
  CHECK(fresh.handover_in_progress);
  CHECK(DescribeHandover(fresh, both, history, now, ttl).has_value());
  LockRecord stale = dissenting;
  SentinelStore::BoundHandover(stale, minority, fresh_clock,
                               now + kSentinelAgreementBound + Millis(1));
  CHECK_FALSE(stale.handover_in_progress);
  CHECK_FALSE(DescribeHandover(stale, both, history, now + kSentinelAgreementBound, ttl));
  // One of three naming m but saying it is failing it over is dissent, shown.
  const LockRecord one_of_three = SentinelRecord(
      {Names("127.0.0.1:7001", 2, true), Names("127.0.0.1:7001", 2), Names("127.0.0.1:7001", 2)});
  CHECK_FALSE(one_of_three.handover_in_progress);
  CHECK(one_of_three.dissent.front() == "sentinel s1:1: failover in progress at epoch 2");
  CHECK_FALSE(DescribeHandover(one_of_three, both, history, now, ttl));
}

TEST_CASE(
    "redis handover: a failover a majority of sentinels reports is excused for the bound "
    "only",
    "[redis][verdict]") {
  const auto now = WallClock::now();
  const Millis ttl(5000);
  ClusterHistory history;
  RecordObservation(history.members["m"], Redis("m", "master", kX), now - std::chrono::hours(1));
  WritableSince(history, "r2", kZ, now - std::chrono::seconds(3));
  const std::vector<std::string> both = {"m", "r2"};
  int minority = -1;
  LockRecord record =
      SentinelRecord({Names("127.0.0.1:7001", 2, true), Names("127.0.0.1:7001", 2, true),
                      Names("127.0.0.1:7001", 2), Names("127.0.0.1:7001", 2, true)},
                     &minority);
  REQUIRE(record.handover_in_progress);
  CHECK(minority == -1);  // a majority: nothing said about a minority
  const auto excused = DescribeHandover(record, both, history, now, ttl);
  REQUIRE(excused.has_value());
  CHECK(excused->from_store);
  CHECK(excused->summary.find("r2 writable beside m for 3000 ms of the 20000 ms bound") !=
        std::string::npos);
  // r2 writable for longer than the bound: Sentinel should have finished; it pages.
  CHECK_FALSE(DescribeHandover(record, both, history, now + std::chrono::seconds(18), ttl));
  // A store without a bound (Patroni's) excuses nothing this way.
  LockRecord unbounded = record;
  unbounded.handover_bound = Millis(0);
  CHECK_FALSE(DescribeHandover(unbounded, both, history, now, ttl));
  // The store itself stops reporting the failover once it has lasted past the bound.
  SentinelStore::HandoverClock clock;
  LockRecord first = record;
  SentinelStore::BoundHandover(first, 0, clock, now);
  CHECK(first.handover_in_progress);
  REQUIRE(clock.majority_since == now);
  LockRecord later = record;
  SentinelStore::BoundHandover(later, 0, clock, now + kSentinelHandoverBound);
  CHECK(later.handover_in_progress);
  LockRecord past = record;
  SentinelStore::BoundHandover(past, 0, clock, now + kSentinelHandoverBound + Millis(1));
  CHECK_FALSE(past.handover_in_progress);
  CHECK(past.dissent.back().find("past the handover bound of 20000 ms: not trusted") !=
        std::string::npos);
  // Then even an r2 writable for three seconds only is not excused by that stale failover.
  CHECK_FALSE(DescribeHandover(past, both, history, now, ttl));
  // Once no failover is reported, the next one is timed afresh.
  LockRecord quiet;
  SentinelStore::BoundHandover(quiet, 0, clock, now + std::chrono::minutes(1));
  CHECK_FALSE(clock.majority_since.has_value());
}

}  // namespace sbd
