#include "detector/verdicts/verdict.h"

#include <catch2/catch.hpp>
#include <set>

#include "detector/config/claim_words.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;

const std::string kLineage = "7000000000000000001";
const std::string kOther = "7000000000000000002";
const SteadyClock::time_point kT0 = SteadyClock::time_point(std::chrono::hours(1));

ClusterSpec Cluster(std::vector<std::string> members) {
  ClusterSpec spec;
  spec.name = "orders";
  for (auto& name : members) {
    MemberSpec member;
    member.name = name;
    spec.members.push_back(member);
  }
  return spec;
}

// A reading taken during [start_ms, end_ms] after kT0.
Observation Read(const std::string& member, bool writable, const std::string& lineage = kLineage,
                 int start_ms = 0, int end_ms = 10, std::int64_t timeline = 1) {
  Observation obs;
  obs.member = member;
  obs.window =
      ReadingWindow{WallClock::now(), kT0 + milliseconds(start_ms), kT0 + milliseconds(end_ms)};
  PostgresReading r;
  r.in_recovery = !writable;
  r.read_only = false;
  r.system_identifier = lineage;
  r.timeline = timeline;
  r.backend_pid = 1000 + static_cast<int>(member[0]);
  r.postmaster_start = "2026-11-29T00:00:00Z";
  obs.result = r;
  return obs;
}

Observation Fail(const std::string& member,
                 ProbeFailureReason reason = ProbeFailureReason::kTimeout) {
  Observation obs;
  obs.member = member;
  obs.window = ReadingWindow{WallClock::now(), kT0, kT0 + milliseconds(1000)};
  obs.result = ProbeFailure{reason, "test"};
  return obs;
}

// Feeds rounds into a history, as the scheduler does, and assesses the last one.
Assessment AssessRounds(const ClusterSpec& spec,
                        const std::vector<std::vector<Observation>>& rounds, bool confirmed) {
  ClusterHistory history;
  for (const auto& round : rounds) {
    for (const auto& obs : round)
      RecordObservation(history.members[obs.member], obs, WallClock::now());
    history.lineage = ChooseLineage(spec, history);
  }
  return Assess(spec, rounds.back(), history, confirmed);
}

}  // namespace

TEST_CASE("verdict: every verdict from a table of rounds", "[verdict]") {
  const ClusterSpec three = Cluster({"a", "b", "c"});
  struct Row {
    const char* name;
    std::vector<std::vector<Observation>> rounds;
    bool confirmed;
    Verdict expected;
    std::vector<std::string> writable, drift, suspects;
    std::string lineage = kLineage;
  };
  const std::vector<Row> rows = {
      {"one writable, two replicas",
       {{Read("a", true), Read("b", false), Read("c", false)}},
       false,
       Verdict::kHealthy,
       {"a"},
       {},
       {}},
      {"every member read, none writable",
       {{Read("a", false), Read("b", false), Read("c", false)}},
       false,
       Verdict::kNoPrimary,
       {},
       {},
       {}},
      {"two writable in one lineage, confirmed",
       {{Read("a", true), Read("b", true), Read("c", false)}},
       true,
       Verdict::kSplitBrain,
       {"a", "b"},
       {},
       {}},
      {"two writable whose readings did not overlap",
       {{Read("a", true), Read("b", true), Read("c", false)}},
       false,
       Verdict::kSuspected,
       {"a", "b"},
       {},
       {}},
      {"the old primary became unreadable while another is writable",
       {{Read("a", true), Read("b", false), Read("c", false)},
        {Fail("a"), Read("b", true), Read("c", false)}},
       false,
       Verdict::kSuspected,
       {"b"},
       {},
       {"a"}},
      {"a writable member of another lineage is drift, not split brain",
       {{Read("a", true), Read("b", false), Read("c", true, kOther)}},
       false,
       Verdict::kDrift,
       {"a"},
       {"c"},
       {}},
      {"a replica cannot be read: not healthy",
       {{Read("a", true), Read("b", false), Fail("c")}},
       false,
       Verdict::kUnknown,
       {"a"},
       {},
       {}},
      {"nothing can be read",
       {{Fail("a"), Fail("b", ProbeFailureReason::kRefused), Fail("c")}},
       false,
       Verdict::kUnknown,
       {},
       {},
       {},
       ""},
      {"an old primary that is shutting down is no suspect (a planned switchover)",
       {{Read("a", true), Read("b", false), Read("c", false)},
        {Fail("a", ProbeFailureReason::kStarting), Read("b", true), Read("c", false)}},
       false,
       Verdict::kUnknown,
       {"b"},
       {},
       {}},
      {"an old primary that refuses connections is no suspect",
       {{Read("a", true), Read("b", false), Read("c", false)},
        {Fail("a", ProbeFailureReason::kRefused), Read("b", true), Read("c", false)}},
       false,
       Verdict::kUnknown,
       {"b"},
       {},
       {}},
      {"an old primary whose connection was cut stays a suspect",
       {{Read("a", true), Read("b", false), Read("c", false)},
        {Fail("a", ProbeFailureReason::kConnectionLost), Read("b", true), Read("c", false)}},
       false,
       Verdict::kSuspected,
       {"b"},
       {},
       {"a"}},
      {"the only primary became unreadable: unknown, with it as suspect",
       {{Read("a", true), Read("b", false), Read("c", false)},
        {Fail("a"), Read("b", false), Read("c", false)}},
       false,
       Verdict::kUnknown,
       {},
       {},
       {"a"}},
      {"split brain outranks drift",
       {{Read("a", true), Read("b", true), Read("c", true, kOther)}},
       true,
       Verdict::kSplitBrain,
       {"a", "b"},
       {"c"},
       {}},
      {"a demoted old primary that is unreadable is no suspect",
       {{Read("a", false), Read("b", true), Read("c", false)},
        {Fail("a"), Read("b", true), Read("c", false)}},
       false,
       Verdict::kUnknown,
       {"b"},
       {},
       {}},
  };
  for (const auto& row : rows) {
    SECTION(row.name) {
      Assessment a = AssessRounds(three, row.rounds, row.confirmed);
      CHECK(VerdictName(a.verdict) == std::string(VerdictName(row.expected)));
      CHECK(a.writable == row.writable);
      CHECK(a.drift == row.drift);
      CHECK(a.suspects == row.suspects);
      CHECK_FALSE(a.summary.empty());
      CHECK(a.lineage == row.lineage);
    }
  }
}

TEST_CASE("verdict: the lock names the zombie; without a holder the older timeline does",
          "[verdict]") {
  ClusterSpec spec = Cluster({"a", "b", "c"});
  spec.scope = "orders";
  const std::vector<Observation> round = {Read("a", true, kLineage, 0, 10, 1),
                                          Read("b", true, kLineage, 0, 10, 2), Read("c", false)};
  ClusterHistory history;
  for (const auto& obs : round)
    RecordObservation(history.members[obs.member], obs, WallClock::now());

  LockRecord view;
  view.holder = "b";
  LockRecordResult dcs = view;
  Assessment held = Assess(spec, round, history, true, &dcs);
  CHECK(held.verdict == Verdict::kSplitBrain);
  CHECK(held.lock_holder == "b");
  CHECK(held.zombies == std::vector<std::string>{"a"});

  view.holder = "";
  dcs = view;
  Assessment unheld = Assess(spec, round, history, true, &dcs);
  CHECK(unheld.zombies == std::vector<std::string>{"a"});
  CHECK(unheld.summary.find("older timeline") != std::string::npos);

  LockRecordResult down = ProbeFailure{ProbeFailureReason::kTimeout, "etcd down"};
  Assessment unreadable = Assess(spec, round, history, true, &down);
  CHECK_FALSE(unreadable.lock_readable);
  CHECK(unreadable.lock_error == "etcd down");
  CHECK(unreadable.verdict == Verdict::kSplitBrain);
  CHECK(unreadable.zombies == std::vector<std::string>{"a"});

  // No lock store at all: nobody holds anything, so nobody is a zombie.
  Assessment unlocked = Assess(spec, round, history, true, nullptr);
  CHECK(unlocked.verdict == Verdict::kSplitBrain);
  CHECK(unlocked.zombies.empty());

  // One writable member that is not the holder: a zombie, or a failover half done.
  const std::vector<Observation> half = {Read("a", true), Read("b", false), Read("c", false)};
  view.holder = "b";
  dcs = view;
  Assessment zombie = Assess(spec, half, history, false, &dcs);
  CHECK(zombie.verdict == Verdict::kSuspected);
  CHECK(zombie.zombies == std::vector<std::string>{"a"});
}

TEST_CASE("verdict: a member whose Patroni claims another scope is drift when writable",
          "[verdict]") {
  ClusterSpec spec = Cluster({"a", "b", "x"});
  spec.scope = "orders";
  std::vector<Observation> round = {Read("a", true), Read("b", false), Read("x", true)};
  PatroniReading claim;
  claim.scope = "other";
  round[2].patroni = claim;
  ClusterHistory history;
  for (const auto& obs : round)
    RecordObservation(history.members[obs.member], obs, WallClock::now());
  Assessment a = Assess(spec, round, history, false);
  CHECK(a.verdict == Verdict::kDrift);
  CHECK(a.drift == std::vector<std::string>{"x"});
  CHECK(a.other_scope == std::vector<std::string>{"x"});
  CHECK(a.writable == std::vector<std::string>{"a"});

  // A cluster without a scope has none a claim could contradict: x counts as writable.
  spec.scope.clear();
  Assessment unscoped = Assess(spec, round, history, false);
  CHECK(unscoped.other_scope.empty());
  CHECK(unscoped.drift.empty());
  CHECK(unscoped.writable == std::vector<std::string>{"a", "x"});
}

TEST_CASE("verdict: a failed probe is never counted as writable or not writable", "[verdict]") {
  Observation failed = Fail("a");
  CHECK_FALSE(failed.ok());
  CHECK_FALSE(failed.seen_writable());
  CHECK(failed.reading() == nullptr);
  MemberHistory history;
  RecordObservation(history, Read("a", true), WallClock::now());
  RecordObservation(history, failed, WallClock::now());
  // The last known state survives the failure; the failure itself adds no reading.
  CHECK(history.last_known_writable());
  CHECK(history.consecutive_failures == 1);
  CHECK_FALSE(history.last->ok());
}

TEST_CASE("verdict: read-only primaries are not writable", "[verdict]") {
  PostgresReading r;
  r.in_recovery = false;
  r.read_only = true;
  CHECK_FALSE(r.writable());
  r.read_only = false;
  CHECK(r.writable());
  r.in_recovery = true;
  CHECK_FALSE(r.writable());
}

TEST_CASE("verdict: confirmation needs two writable readings that overlap in time", "[verdict]") {
  SECTION("overlapping writable readings confirm") {
    auto confirmed = ConfirmedWritable(
        {Read("a", true, kLineage, 0, 10), Read("b", true, kLineage, 5, 15)}, kLineage);
    CHECK(confirmed == std::vector<std::string>{"a", "b"});
  }
  SECTION("a switchover: the old primary is a replica in the re-probe") {
    CHECK(ConfirmedWritable({Read("a", false, kLineage, 0, 10), Read("b", true, kLineage, 0, 10)},
                            kLineage)
              .empty());
  }
  SECTION("writable readings that do not overlap do not confirm") {
    CHECK(ConfirmedWritable({Read("a", true, kLineage, 0, 10), Read("b", true, kLineage, 11, 20)},
                            kLineage)
              .empty());
  }
  SECTION("touching windows share an instant") {
    CHECK(ConfirmedWritable({Read("a", true, kLineage, 0, 10), Read("b", true, kLineage, 10, 20)},
                            kLineage)
              .size() == 2);
  }
  SECTION("a member of another lineage does not confirm") {
    CHECK(ConfirmedWritable({Read("a", true, kLineage, 0, 10), Read("b", true, kOther, 0, 10)},
                            kLineage)
              .empty());
  }
  SECTION("a failed re-probe does not confirm") {
    CHECK(ConfirmedWritable({Read("a", true, kLineage, 0, 10), Fail("b")}, kLineage).empty());
  }
  SECTION("an unbroken session spans its two writable readings") {
    // a: writable at 0-1 and again at 30-31 on the same backend; b: writable at 20-21 only.
    std::vector<Observation> first = {Read("a", true, kLineage, 0, 1)};
    std::vector<Observation> again = {Read("a", true, kLineage, 30, 31),
                                      Read("b", true, kLineage, 20, 21)};
    CHECK(ConfirmedWritable(again, kLineage).empty());  // the re-probe alone does not overlap
    CHECK(ConfirmedWritable(again, kLineage, &first).size() == 2);
    // A restart in between (another backend) proves nothing about the time in between.
    std::get<PostgresReading>(again[0].result).backend_pid = 4242;
    CHECK(ConfirmedWritable(again, kLineage, &first).empty());
  }
  SECTION("a third writable member joins when it overlaps both") {
    auto confirmed =
        ConfirmedWritable({Read("a", true, kLineage, 0, 10), Read("b", true, kLineage, 2, 12),
                           Read("c", true, kLineage, 5, 8)},
                          kLineage);
    CHECK(confirmed == std::vector<std::string>{"a", "b", "c"});
  }
}

TEST_CASE("verdict: the lineage follows the majority, else the configured identifier",
          "[verdict]") {
  ClusterSpec spec = Cluster({"a", "b", "c"});
  ClusterHistory history;
  RecordObservation(history.members["a"], Read("a", true, kOther), WallClock::now());
  RecordObservation(history.members["b"], Read("b", false), WallClock::now());
  RecordObservation(history.members["c"], Read("c", false), WallClock::now());
  CHECK(ChooseLineage(spec, history) == kLineage);
  spec.system_identifier = kOther;
  CHECK(ChooseLineage(spec, history) == kOther);
  Assessment a =
      Assess(spec, {Read("a", true, kOther), Read("b", false), Read("c", false)}, history, false);
  CHECK(a.verdict == Verdict::kHealthy);
}

TEST_CASE("verdict: exit codes are distinct and healthy is zero", "[verdict]") {
  std::set<int> codes;
  for (Verdict v : AllVerdicts()) codes.insert(VerdictExitCode(v));
  CHECK(codes.size() == AllVerdicts().size());
  CHECK(VerdictExitCode(Verdict::kHealthy) == 0);
  CHECK(VerdictExitCode(Verdict::kSplitBrain) == 7);
}

}  // namespace sbd

namespace sbd {

TEST_CASE("verdict: each kind words its claim: writable, claiming the lease, claiming the lock",
          "[verdict]") {
  struct Row {
    const char* kind;
    const char* only;
    const char* none;
  };
  const std::vector<Row> rows = {
      {"postgres", "a is the only writable member", "every member read, none writable"},
      {"patroni", "a is the only writable member", "every member read, none writable"},
      {"redis", "a is the only writable member", "every member read, none writable"},
      {"redis_lease", "a is the only member claiming the lease",
       "every member read, none claiming the lease"},
      {"k8s_lease", "a is the only member claiming the lease",
       "every member read, none claiming the lease"},
      {"etcd_election", "a is the only member claiming the lock",
       "every member read, none claiming the lock"},
      {"zookeeper_lock", "a is the only member claiming the lock",
       "every member read, none claiming the lock"},
  };
  for (const Row& row : rows) {
    INFO(row.kind);
    ClusterSpec spec = Cluster({"a", "b"});
    spec.kind = row.kind;
    CHECK(AssessRounds(spec, {{Read("a", true), Read("b", false)}}, false).summary == row.only);
    CHECK(AssessRounds(spec, {{Read("a", false), Read("b", false)}}, false).summary == row.none);
    const Assessment two = AssessRounds(spec, {{Read("a", true), Read("b", true)}}, true);
    CHECK(two.verdict == Verdict::kSplitBrain);
    CHECK(two.summary.find(std::string("2 members ") + ClaimWordsOf(row.kind).many +
                           " at once in lineage") == 0);
  }
  // A kind that names no words of its own (or an unknown one) is worded as a database.
  CHECK(&ClaimWordsOf("no-such-kind") == &kWritableWords);
}

}  // namespace sbd
