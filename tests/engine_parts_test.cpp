// The engine's parts without a scheduler, threads or sockets: confirmation (confirmation.h),
// a whole round folded into a cluster's state (FoldRound, fold.h), and discovery
// (discovery.h).
#include <catch2/catch.hpp>

#include "detector/engine/confirmation.h"
#include "detector/engine/discovery.h"
#include "detector/engine/fold.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const WallClock::time_point kWall = WallClock::time_point(std::chrono::hours(1000));
const SteadyClock::time_point kT0 = SteadyClock::time_point(std::chrono::hours(1));

ClusterSnapshot Cluster(std::vector<std::string> members) {
  ClusterSnapshot state;
  state.spec.name = "orders";
  state.spec.ttl = Millis(10000);
  for (auto& name : members) {
    MemberSpec member;
    member.name = name;
    state.spec.members.push_back(member);
  }
  return state;
}

// A PostgreSQL reading of lineage "L" taken during [start_ms, end_ms] after kT0.
Observation Read(const std::string& member, bool writable, int start_ms, int end_ms,
                 std::int64_t timeline = 1) {
  Observation obs;
  obs.member = member;
  obs.window = ReadingWindow{kWall, kT0 + milliseconds(start_ms), kT0 + milliseconds(end_ms)};
  PostgresReading r;
  r.in_recovery = !writable;
  r.read_only = false;
  r.system_identifier = "L";
  r.timeline = timeline;
  r.backend_pid = 1000 + static_cast<int>(member[0]);
  r.postmaster_start = "2026-11-29T00:00:00Z";
  obs.result = r;
  return obs;
}

RoundReadings Round(std::vector<Observation> members) {
  RoundReadings readings;
  readings.members = std::move(members);
  return readings;
}

}  // namespace

TEST_CASE("engine parts: candidates are the lineage's writable members; re-probes are bounded",
          "[engine]") {
  const ClusterSnapshot state = Cluster({"a", "b", "c"});
  const std::vector<Observation> round = {Read("a", true, 0, 5), Read("b", false, 0, 5),
                                          Read("c", true, 0, 5)};
  CHECK(ConfirmationCandidates(state.spec, round, "L") == std::vector<size_t>{0, 2});
  CHECK(ConfirmationCandidates(state.spec, round, "other").empty());

  const std::vector<Observation> writable = {Read("a", true, 0, 5), Read("c", true, 6, 9)};
  CHECK(ReprobeAgain(0, {}, writable));
  CHECK(ReprobeAgain(kConfirmationRetries - 1, {}, writable));
  CHECK_FALSE(ReprobeAgain(kConfirmationRetries, {}, writable));
  CHECK_FALSE(ReprobeAgain(0, {"a", "c"}, writable));
  CHECK_FALSE(ReprobeAgain(0, {}, {Read("a", true, 0, 5), Read("c", false, 0, 5)}));
  CHECK_FALSE(ReprobeAgain(0, {}, {}));
}

TEST_CASE("engine parts: ConfirmRound confirms overlapping writable re-probes and keeps them",
          "[engine]") {
  RoundReadings round =
      Round({Read("a", true, 0, 5), Read("b", false, 0, 5), Read("c", true, 0, 5)});
  const std::vector<size_t> again = {0, 2};
  RoundReadings reprobe = Round({Read("a", true, 100, 110), Read("c", true, 101, 111)});
  int history_reads = 0;
  const auto history = [&] {
    ++history_reads;
    return ClusterHistory{};
  };
  const Confirmation confirmed =
      ConfirmRound(round, again, reprobe, {"a", "c"}, history, kWall, Millis(10000));
  CHECK(confirmed.candidate);
  CHECK(confirmed.confirmed);
  CHECK_FALSE(confirmed.transition);
  CHECK(history_reads == 0);  // no lock record: no handover to ask the history about
  // The re-probe's fresher readings replaced the candidates' first ones.
  CHECK(round.members[0].window.sent == kT0 + milliseconds(100));
  CHECK(round.members[1].window.sent == kT0);
  CHECK(round.members[2].window.sent == kT0 + milliseconds(101));

  // Not confirmed, and the second reading is a replica on a newer timeline: a failover.
  RoundReadings moved = Round({Read("a", true, 0, 5), Read("b", true, 0, 5)});
  RoundReadings after = Round({Read("a", false, 100, 110, 2), Read("b", true, 100, 110, 2)});
  const Confirmation explained =
      ConfirmRound(moved, {0, 1}, after, {}, history, kWall, Millis(10000));
  CHECK(explained.candidate);
  CHECK_FALSE(explained.confirmed);
}

TEST_CASE("engine parts: FoldRound opens the incident on a confirmed split brain, only then",
          "[engine][fold]") {
  ClusterSnapshot state = Cluster({"a", "b"});
  RoundReadings healthy = Round({Read("a", true, 0, 5), Read("b", false, 0, 5)});
  FoldRound(state, healthy, Confirmation{}, {}, kWall);
  CHECK(state.assessment.verdict == Verdict::kHealthy);
  CHECK(state.last_primary == "a");
  CHECK(state.last_round.size() == 2);
  CHECK(state.counters["a"].probes == 1);

  // Two writable, the re-probe not confirming them: no split brain, counted as rejected.
  Confirmation rejected;
  rejected.candidate = true;
  RoundReadings two = Round({Read("a", true, 1000, 1005), Read("b", true, 1000, 1005)});
  FoldRound(state, two, rejected, {}, kWall + seconds(1));
  CHECK(state.assessment.verdict != Verdict::kSplitBrain);
  CHECK_FALSE(state.split_brain_open);
  CHECK(state.confirmations_rejected == 1);

  Confirmation confirmed;
  confirmed.candidate = true;
  confirmed.confirmed = true;
  RoundReadings again = Round({Read("a", true, 2000, 2005), Read("b", true, 2000, 2005)});
  FoldRound(state, again, confirmed, {}, kWall + seconds(2));
  CHECK(state.assessment.verdict == Verdict::kSplitBrain);
  CHECK(state.split_brain_open);
  CHECK(state.split_brain_opened_at == kWall + seconds(2));
  CHECK(state.confirmations_accepted == 1);
  CHECK(state.write_window.has_value());
}

TEST_CASE("engine parts: FoldRound remembers the incident's zombie until the incident closes",
          "[engine][fold]") {
  ClusterSnapshot state = Cluster({"a", "b"});
  Confirmation confirmed;
  confirmed.candidate = true;
  confirmed.confirmed = true;
  // The store names b; a still writes: a is the zombie.
  LockRecord record;
  record.holder = "b";
  RoundReadings both = Round({Read("a", true, 0, 5), Read("b", true, 0, 5)});
  both.dcs = record;
  FoldRound(state, both, confirmed, {}, kWall);
  REQUIRE(state.split_brain_open);
  REQUIRE(state.assessment.zombies == std::vector<std::string>{"a"});
  CHECK(state.split_brain_zombies == std::vector<std::string>{"a"});
  CHECK(state.split_brain_zombies_at == kWall);

  // a turns unreadable: the incident stays open and a is still the one to stop.
  Observation gone;
  gone.member = "a";
  gone.window = ReadingWindow{kWall, kT0 + milliseconds(1000), kT0 + milliseconds(1800)};
  gone.result = ProbeFailure{ProbeFailureReason::kRefused, "connection refused"};
  RoundReadings unreadable = Round({gone, Read("b", true, 1000, 1005)});
  unreadable.dcs = record;
  FoldRound(state, unreadable, Confirmation{}, {}, kWall + seconds(1));
  CHECK(state.split_brain_open);
  CHECK(state.assessment.zombies.empty());
  CHECK(state.split_brain_zombies == std::vector<std::string>{"a"});
  CHECK(state.split_brain_zombies_at == kWall);

  // Every member read, one writable: the incident closes and forgets its zombie.
  RoundReadings over = Round({Read("a", false, 2000, 2005), Read("b", true, 2000, 2005)});
  over.dcs = record;
  FoldRound(state, over, Confirmation{}, {}, kWall + seconds(2));
  CHECK_FALSE(state.split_brain_open);
  CHECK(state.split_brain_zombies.empty());
  CHECK(state.split_brain_holder.empty());
}

TEST_CASE("engine parts: FoldRound keeps the lock store's answer and its ttl", "[engine][fold]") {
  ClusterSnapshot state = Cluster({"a", "b"});
  state.spec.ttl_from_dcs = true;
  state.spec.probe_interval = Millis(5000);
  state.spec.probe_timeout = Millis(4000);
  LockRecord view;
  view.holder = "a";
  view.config_ttl = 6;  // Patroni's ttl 6 s is below three 5 s intervals
  RoundReadings round = Round({Read("a", true, 0, 5), Read("b", false, 0, 5)});
  round.dcs = view;
  FoldRound(state, round, Confirmation{}, {}, kWall);
  REQUIRE(state.last_good_dcs);
  CHECK(state.last_good_dcs->holder == "a");
  const Timing timing = state.timing();
  CHECK(timing.ttl == Millis(6000));
  CHECK(std::string(timing.ttl_source) == "lock store");
  CHECK(timing.probe_interval == Millis(600));
  CHECK(std::string(timing.interval_source) == "ttl/10");
  CHECK(timing.probe_timeout == Millis(600));
  // The spec stays as validated.
  CHECK(state.spec.probe_interval == Millis(5000));
  CHECK(state.spec.probe_timeout == Millis(4000));

  // Patroni's ttl raised to 60 s: the configured interval fits again, and is taken back.
  RoundReadings raised = Round({Read("a", true, 0, 5), Read("b", false, 0, 5)});
  view.config_ttl = 60;
  raised.dcs = view;
  FoldRound(state, raised, Confirmation{}, {}, kWall + milliseconds(500));
  CHECK(state.timing().ttl == Millis(60000));
  CHECK(state.timing().probe_interval == Millis(5000));
  CHECK(std::string(state.timing().interval_source) == "config");
  view.config_ttl = 6;

  RoundReadings unreadable = Round({Read("a", true, 0, 5), Read("b", false, 0, 5)});
  unreadable.dcs = ProbeFailure{ProbeFailureReason::kTimeout, "etcd: no answer"};
  FoldRound(state, unreadable, Confirmation{}, {}, kWall + seconds(1));
  CHECK(state.dcs_failures == 1);
  CHECK(state.dcs_consecutive_failures == 1);
  CHECK(state.last_good_dcs->holder == "a");  // the last good record is kept
  CHECK(state.last_dcs_success == kWall + milliseconds(500));
}

TEST_CASE("engine parts: discovery adds members within max_members and expires the gone ones",
          "[engine][discovery]") {
  ClusterSnapshot state = Cluster({"pg1"});
  state.spec.discovery.enabled = true;
  state.spec.discovery.max_members = 2;
  state.spec.discovery.dsn = "user=splitbrain dbname=postgres";
  state.spec.discovery.expire_after = std::chrono::seconds(60);
  LockRecord view;
  const auto registered = [](std::string name, std::string conn, std::string api = "") {
    DcsMember m;
    m.name = std::move(name);
    m.conn_url = std::move(conn);
    m.api_url = std::move(api);
    return m;
  };
  view.members = {
      registered("pg1", "postgres://10.0.0.1:5432/postgres", "http://10.0.0.1:8008/patroni"),
      registered("pg2", "postgres://u@10.0.0.2:5433/postgres"),
      registered("pg2", "postgres://10.0.0.2:5433/postgres"),
      registered("bad", "no scheme"),
      registered("pg3", "postgres://10.0.0.3/x"),
      registered("pg4", "postgres://10.0.0.4/x")};
  DiscoveryPlan plan = PlanDiscovery(state.spec, view, [](size_t) { return false; });
  REQUIRE(plan.managers.size() == 1);
  CHECK(plan.managers[0] == std::make_pair(size_t{0}, std::string("http://10.0.0.1:8008")));
  REQUIRE(plan.added.size() == 2);
  CHECK(plan.added[0].name == "pg2");
  CHECK(plan.added[0].address == "10.0.0.2:5433");
  CHECK(plan.added[0].discovered);
  CHECK(plan.added[1].name == "pg3");
  CHECK(plan.rejected == std::vector<std::string>{"pg4"});
  // A member that has its manager gets none; discovery off adds nobody.
  CHECK(PlanDiscovery(state.spec, view, [](size_t) { return true; }).managers.empty());
  ClusterSpec off = state.spec;
  off.discovery.enabled = false;
  CHECK(PlanDiscovery(off, view, [](size_t) { return false; }).added.empty());

  for (MemberSpec& m : plan.added) state.spec.members.push_back(m);
  std::map<std::string, WallClock::time_point> absent;
  LockRecord later;
  later.members = {view.members[0], view.members[1]};  // pg3 gone from the record
  TrackAbsence(state.spec, later, absent, kWall);
  CHECK(absent.count("pg3") == 1);
  CHECK(absent.count("pg2") == 0);
  CHECK(absent.count("pg1") == 0);  // configured: never expires
  // Absent but read well recently: kept, however long it has been gone from the record.
  state.history.members["pg3"].last_ok = kWall + seconds(50);
  CHECK(ExpireDiscovered(state, absent, kWall + seconds(100)).empty());
  // Absent and unreadable for expire_after: dropped, with its history.
  const std::vector<size_t> dropped = ExpireDiscovered(state, absent, kWall + seconds(111));
  CHECK(dropped == std::vector<size_t>{2});
  CHECK(state.spec.members.size() == 2);
  CHECK(state.history.members.count("pg3") == 0);
  CHECK(state.discovered_expired == 1);
  CHECK(absent.empty());
}

}  // namespace sbd
