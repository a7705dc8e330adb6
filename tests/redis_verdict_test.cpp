// The verdict on Redis claims: masters linked by replid/replid2 are one lineage, unrelated
// masters are drift, a master refusing writes for want of replicas is a fenced holder.
#include <catch2/catch.hpp>

#include "detector/verdicts/verdict.h"
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
  DcsView record;
  record.holder = holder;
  const DcsResult dcs = record;
  history.lineage = ChooseLineage(spec, history, &dcs);
  return Assess(spec, round, history, confirmed, &dcs);
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
  DcsView record;
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

}  // namespace sbd
