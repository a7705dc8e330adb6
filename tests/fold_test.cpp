// How a round folds into a cluster's state (detector/engine/fold.h), without a scheduler,
// threads or sockets: the split-brain incident opened and closed, the verdict's streak, and
// what a reload carries over.
#include "detector/engine/fold.h"

#include <catch2/catch.hpp>

namespace sbd {
namespace {

const WallClock::time_point kT0 = WallClock::time_point(std::chrono::hours(1000));

ClusterSnapshot Cluster(std::vector<std::string> members) {
  ClusterSnapshot state;
  state.spec.name = "orders";
  for (auto& name : members) {
    MemberSpec member;
    member.name = name;
    state.spec.members.push_back(member);
  }
  return state;
}

Assessment Judged(Verdict verdict, std::vector<std::string> writable,
                  std::vector<std::string> unreadable = {}) {
  Assessment a;
  a.verdict = verdict;
  a.writable = std::move(writable);
  a.unreadable = std::move(unreadable);
  a.summary = "test";
  return a;
}

}  // namespace

TEST_CASE("fold: a confirmed split brain opens the incident; only a fully read round closes it",
          "[fold]") {
  ClusterSnapshot state = Cluster({"a", "b"});
  RecordVerdict(state, Judged(Verdict::kHealthy, {"a"}), kT0);
  state.has_round = true;  // as the scheduler marks it after the first round
  CHECK_FALSE(state.split_brain_open);
  CHECK(state.verdict_rounds == 1);

  RecordVerdict(state, Judged(Verdict::kSplitBrain, {"a", "b"}), kT0 + std::chrono::seconds(1));
  CHECK(state.split_brain_open);
  CHECK(state.split_brain_opened_at == kT0 + std::chrono::seconds(1));
  CHECK(state.verdict_since == kT0 + std::chrono::seconds(1));
  CHECK(state.verdict_rounds == 1);

  // The zombie goes dark: not seen to be over, so the incident stays open, opened when it was.
  RecordVerdict(state, Judged(Verdict::kUnknown, {"b"}, {"a"}), kT0 + std::chrono::seconds(2));
  CHECK(state.split_brain_open);
  CHECK(state.split_brain_opened_at == kT0 + std::chrono::seconds(1));
  RecordVerdict(state, Judged(Verdict::kUnknown, {"b"}, {"a"}), kT0 + std::chrono::seconds(3));
  CHECK(state.verdict_rounds == 2);

  // Every member read, one writable: over.
  RecordVerdict(state, Judged(Verdict::kHealthy, {"b"}), kT0 + std::chrono::seconds(4));
  CHECK_FALSE(state.split_brain_open);
  CHECK(state.assessment.writable == std::vector<std::string>{"b"});
}

TEST_CASE("fold: a fenced double holder opens no incident", "[fold]") {
  ClusterSnapshot state = Cluster({"a", "b"});
  Assessment fenced = Judged(Verdict::kSplitBrain, {"a", "b"});
  fenced.split_brain_fenced = true;
  RecordVerdict(state, fenced, kT0);
  CHECK_FALSE(state.split_brain_open);
  CHECK(state.assessment.verdict == Verdict::kSplitBrain);
}

TEST_CASE("fold: a reload keeps what rounds wrote, for the members the new config still has",
          "[fold]") {
  ClusterSnapshot old = Cluster({"a", "b"});
  old.rounds = 40;
  old.follow_up_rounds = 7;
  old.wakes = 3;
  old.transitions = 2;
  old.split_brain_open = true;
  old.counters["a"].probes = 40;
  old.counters["b"].probes = 39;
  old.history.members["a"].writable_since = kT0;
  old.history.members["b"];
  old.discovery_rejected = {"z"};
  old.last_dcs = LockRecordResult(ProbeFailure{ProbeFailureReason::kTimeout, "x"});
  Observation a, b;
  a.member = "a";
  b.member = "b";
  old.last_round = {a, b};
  old.lock.kind = "postgres";

  ClusterSnapshot now = Cluster({"a", "c"});  // b removed, c added
  now.spec.probe_interval = std::chrono::milliseconds(250);
  now.lock.kind = "patroni";
  now.history.members["a"];
  now.history.members["c"];
  now.counters["c"];
  InheritState(old, now);

  CHECK(now.spec.probe_interval == std::chrono::milliseconds(250));  // the new config's
  CHECK(now.lock.kind == "patroni");
  CHECK(now.rounds == 40);
  CHECK(now.follow_up_rounds == 7);
  CHECK(now.wakes == 3);
  CHECK(now.transitions == 2);
  CHECK(now.split_brain_open);
  CHECK(now.counters.at("a").probes == 40);
  CHECK(now.counters.count("b") == 0);
  CHECK(now.counters.count("c") == 1);
  CHECK(now.history.members.at("a").writable_since.has_value());
  CHECK(now.history.members.count("b") == 0);
  CHECK(now.history.members.count("c") == 1);
  REQUIRE(now.last_round.size() == 1);
  CHECK(now.last_round[0].member == "a");
  // What the next round rewrites is not carried.
  CHECK_FALSE(now.last_dcs.has_value());
  CHECK(now.discovery_rejected.empty());
}

TEST_CASE("fold: the round's readings count per member and per failure reason", "[fold]") {
  ClusterSnapshot state = Cluster({"a", "b"});
  Observation ok;
  ok.member = "a";
  ok.window = ReadingWindow{kT0, SteadyClock::time_point(std::chrono::seconds(1)),
                            SteadyClock::time_point(std::chrono::milliseconds(1250))};
  PostgresReading r;
  r.system_identifier = "1";
  ok.result = r;
  Observation failed;
  failed.member = "b";
  failed.result = ProbeFailure{ProbeFailureReason::kRefused, "refused"};
  RecordObservations(state, {ok, failed}, kT0, "");
  RecordObservations(state, {ok, failed}, kT0 + std::chrono::seconds(1), "");
  CHECK(state.counters.at("a").probes == 2);
  CHECK(state.counters.at("a").last_duration_seconds == Approx(0.25));
  CHECK(state.counters.at("b").failures_by_reason.at(ReasonName(ProbeFailureReason::kRefused)) ==
        2);
  CHECK(HolderOf(nullptr).empty());
  LockRecord view;
  view.holder = "a";
  const LockRecordResult named(view);
  CHECK(HolderOf(&named) == "a");
}

}  // namespace sbd
