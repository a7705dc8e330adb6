#include "detector/output/incident_log.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "tests/support/temp_dir.h"

namespace {

using sbd::ClusterSnapshot;
using sbd::IncidentEvent;
using sbd::IncidentLog;
using sbd::IncidentLogSpec;
using sbd::Verdict;
using sbd::WallClock;

const WallClock::time_point kT0 = WallClock::from_time_t(1800000000);

sbd::Observation Reading(const std::string& member, bool writable) {
  sbd::PostgresReading reading;
  reading.in_recovery = !writable;
  reading.read_only = !writable;
  reading.system_identifier = "7000";
  sbd::Observation obs;
  obs.member = member;
  obs.result = reading;
  return obs;
}

sbd::Observation Failure(const std::string& member) {
  sbd::Observation obs;
  obs.member = member;
  obs.result = sbd::ProbeFailure{sbd::ProbeFailureReason::kRefused, "host=db password=x"};
  return obs;
}

// A cluster of pg1 and pg2 after a round at `at` with the given verdict and observations.
ClusterSnapshot Round(const std::string& name, Verdict verdict, std::vector<sbd::Observation> obs,
                      WallClock::time_point at) {
  ClusterSnapshot c;
  c.spec.name = name;
  for (const auto& o : obs) {
    sbd::MemberSpec member;
    member.name = o.member;
    c.spec.members.push_back(member);
  }
  c.has_round = true;
  c.assessment.verdict = verdict;
  c.assessment.raw_verdict = verdict;
  c.assessment.summary = std::string(sbd::VerdictName(verdict)) + " summary";
  c.last_round = std::move(obs);
  c.last_round_end = at;
  return c;
}

ClusterSnapshot Healthy(const std::string& name, WallClock::time_point at) {
  return Round(name, Verdict::kHealthy, {Reading("pg1", true), Reading("pg2", false)}, at);
}

ClusterSnapshot SplitBrain(const std::string& name, WallClock::time_point at) {
  ClusterSnapshot c =
      Round(name, Verdict::kSplitBrain, {Reading("pg1", true), Reading("pg2", true)}, at);
  c.assessment.writable = {"pg1", "pg2"};
  c.assessment.zombies = {"pg2"};
  c.assessment.lock_holder = "pg1";
  c.split_brain_open = true;
  return c;
}

IncidentLogSpec Spec(const std::string& file = "", int max_events = 10000) {
  IncidentLogSpec spec;
  spec.file = file;
  spec.max_events = max_events;
  return spec;
}

std::vector<std::string> Kinds(const IncidentLog& log) {
  std::vector<std::string> kinds;
  for (const auto& e : log.Events()) kinds.push_back(e.kind);
  return kinds;
}

size_t LineCount(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

}  // namespace

TEST_CASE("incident log: a first round records the cluster once", "[incidents]") {
  IncidentLog log(Spec(), kT0);
  log.ObserveRound(Healthy("orders", kT0), kT0);
  log.ObserveRound(Healthy("orders", kT0 + std::chrono::seconds(1)), kT0);
  REQUIRE(Kinds(log) == std::vector<std::string>{"cluster_added"});
  const IncidentEvent added = log.Events().front();
  CHECK(added.cluster == "orders");
  CHECK(added.fields["verdict"] == "healthy");
  CHECK(added.fields["members"] == nlohmann::json({{"pg1", "writable"}, {"pg2", "standby"}}));
}

TEST_CASE("incident log: a verdict change records one event naming the members", "[incidents]") {
  IncidentLog log(Spec(), kT0);
  log.ObserveRound(Healthy("orders", kT0), kT0);
  const auto t1 = kT0 + std::chrono::seconds(3);
  log.ObserveRound(SplitBrain("orders", t1), t1);
  log.ObserveRound(SplitBrain("orders", t1 + std::chrono::seconds(3)), t1);
  REQUIRE(Kinds(log) == std::vector<std::string>{"cluster_added", "verdict_changed",
                                                 "split_brain_opened", "member_state_changed"});
  const auto events = log.Events();
  const IncidentEvent& verdict = events[1];
  CHECK(verdict.time == t1);
  CHECK(verdict.fields["from"] == "healthy");
  CHECK(verdict.fields["to"] == "split_brain");
  CHECK(verdict.fields["summary"] == "split_brain summary");
  CHECK(verdict.fields["writable"] == nlohmann::json({"pg1", "pg2"}));
  CHECK(verdict.fields["zombies"] == nlohmann::json({"pg2"}));
  CHECK(verdict.fields["lock_holder"] == "pg1");
  CHECK(events[3].fields ==
        nlohmann::json({{"member", "pg2"}, {"from", "standby"}, {"to", "writable"}}));
  // Back to healthy closes the incident.
  log.ObserveRound(Healthy("orders", t1 + std::chrono::seconds(6)), t1);
  CHECK(Kinds(log).size() == 7);
  CHECK(log.Events()[5].kind == "split_brain_closed");
}

TEST_CASE("incident log: a member that turns unreadable is recorded with its reason only",
          "[incidents]") {
  IncidentLog log(Spec(), kT0);
  log.ObserveRound(Healthy("orders", kT0), kT0);
  log.ObserveRound(Round("orders", Verdict::kUnknown, {Reading("pg1", true), Failure("pg2")}, kT0),
                   kT0);
  REQUIRE(Kinds(log) ==
          std::vector<std::string>{"cluster_added", "verdict_changed", "member_state_changed"});
  const nlohmann::json fields = log.Events()[2].fields;
  CHECK(fields ==
        nlohmann::json(
            {{"member", "pg2"}, {"from", "standby"}, {"to", "unreadable"}, {"reason", "refused"}}));
  // The probe's message (which could quote a DSN) is never kept.
  CHECK(log.Query({}).dump().find("password") == std::string::npos);
}

TEST_CASE("incident log: a cluster gone from the config is recorded as removed", "[incidents]") {
  IncidentLog log(Spec(), kT0);
  log.ObserveRound(Healthy("orders", kT0), kT0);
  log.ObserveRound(Healthy("billing", kT0), kT0);
  sbd::ClusterSpec billing;
  billing.name = "billing";
  log.SetClusters({billing}, kT0);
  log.SetClusters({billing}, kT0);
  REQUIRE(Kinds(log) ==
          std::vector<std::string>{"cluster_added", "cluster_added", "cluster_removed"});
  CHECK(log.Events()[2].cluster == "orders");
  // Seen again after a reload that brought it back: added again.
  log.ObserveRound(Healthy("orders", kT0), kT0);
  CHECK(Kinds(log).back() == "cluster_added");
}

TEST_CASE("incident log: events past the retention are dropped", "[incidents]") {
  IncidentLogSpec spec = Spec();
  spec.retention = std::chrono::hours(1);
  IncidentLog log(spec, kT0);
  log.ObserveRound(Healthy("orders", kT0), kT0);
  const auto later = kT0 + std::chrono::minutes(50);
  log.ObserveRound(SplitBrain("orders", later), later);
  CHECK(log.size() == 4);
  const auto after = kT0 + std::chrono::minutes(70);
  log.ObserveRound(SplitBrain("orders", after), after);  // nothing new, but prunes
  CHECK(Kinds(log) ==
        std::vector<std::string>{"verdict_changed", "split_brain_opened", "member_state_changed"});
  CHECK(log.dropped() == 0);  // expiry is the retention working, not loss
}

TEST_CASE("incident log: the cap drops the oldest and counts each drop", "[incidents]") {
  IncidentLog log(Spec("", 3), kT0);
  auto t = kT0;
  log.ObserveRound(Healthy("orders", t), t);
  for (int i = 0; i < 3; ++i) {
    t += std::chrono::seconds(1);
    log.ObserveRound(
        Round("orders", Verdict::kNoPrimary, {Reading("pg1", false), Reading("pg2", false)}, t), t);
    t += std::chrono::seconds(1);
    log.ObserveRound(Healthy("orders", t), t);
  }
  CHECK(log.size() == 3);
  CHECK(log.dropped() == 10);  // 1 added + 3 x (2 verdicts + 2 member changes) = 13, keep 3
  CHECK(log.Events().back().time == t);
}

TEST_CASE("incident log: events survive a restart from the file", "[incidents]") {
  sbd::testing::TempDir dir("sbd-incidents");
  const std::string path = dir.path() + "/incidents.jsonl";
  {
    IncidentLog log(Spec(path), kT0);
    log.ObserveRound(Healthy("orders", kT0), kT0);
    log.ObserveRound(SplitBrain("orders", kT0 + std::chrono::seconds(1)), kT0);
  }
  CHECK(LineCount(path) == 4);
  IncidentLog restarted(Spec(path), kT0 + std::chrono::seconds(2));
  REQUIRE(Kinds(restarted) == std::vector<std::string>{"cluster_added", "verdict_changed",
                                                       "split_brain_opened",
                                                       "member_state_changed"});
  CHECK(restarted.Events()[1].fields["to"] == "split_brain");
  CHECK(restarted.Events()[1].time == kT0 + std::chrono::seconds(1));
  // The restarted log remembers the state: the same round records nothing new, a change does.
  const auto t = kT0 + std::chrono::seconds(3);
  restarted.ObserveRound(SplitBrain("orders", t), t);
  CHECK(restarted.size() == 4);
  restarted.ObserveRound(Healthy("orders", t), t);
  CHECK(Kinds(restarted).back() == "member_state_changed");
  CHECK(restarted.size() == 7);
  REQUIRE(restarted.Flush(std::chrono::seconds(10)));
  CHECK(LineCount(path) == 7);
}

TEST_CASE("incident log: corrupt, truncated and unknown lines are skipped and counted",
          "[incidents]") {
  sbd::testing::TempDir dir("sbd-incidents");
  const std::string path = dir.path() + "/incidents.jsonl";
  {
    IncidentLog log(Spec(path), kT0);
    log.ObserveRound(Healthy("orders", kT0), kT0);
  }
  {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << "not json at all\n"
        << std::string("\0\xff\xfe", 3) << "\n"
        << "[1,2,3]\n"
        << R"({"v":2,"time":"2027-01-15T08:00:00Z","cluster":"orders","kind":"verdict_changed","fields":{}})"
        << "\n"
        << R"({"v":1,"time":"2099-01-01T00:00:00Z","cluster":"orders","kind":"verdict_changed","fields":{}})"
        << "\n"
        << R"({"v":1,"time":"2027-01-15T08:00:00Z","cluster":"orders","kind":"exploded","fields":{}})"
        << "\n"
        << R"({"v":1,"time":"2027-01-15T08:00:00Z","cluster":"orders","kind":"verdict_chan)";
  }
  IncidentLog restarted(Spec(path), kT0 + std::chrono::seconds(1));
  CHECK(restarted.skipped_lines() == 7);
  CHECK(Kinds(restarted) == std::vector<std::string>{"cluster_added"});
  // Compacted at start: only the kept event is left in the file.
  REQUIRE(restarted.Flush(std::chrono::seconds(10)));
  CHECK(LineCount(path) == 1);
}

TEST_CASE("incident log: a file over the size bound is read from its newest part", "[incidents]") {
  sbd::testing::TempDir dir("sbd-incidents");
  const std::string path = dir.path() + "/incidents.jsonl";
  {
    IncidentLog log(Spec(path), kT0);
    auto t = kT0;
    log.ObserveRound(Healthy("orders", t), t);
    for (int i = 0; i < 50; ++i) {
      t += std::chrono::seconds(1);
      log.ObserveRound(i % 2 ? Healthy("orders", t) : SplitBrain("orders", t), t);
    }
  }
  const auto size = std::filesystem::file_size(path);
  IncidentLog bounded(Spec(path), kT0 + std::chrono::minutes(1), size / 4);
  CHECK(bounded.size() > 0);
  CHECK(bounded.size() < 60);
  CHECK(bounded.Events().back().time == kT0 + std::chrono::seconds(50));
  REQUIRE(bounded.Flush(std::chrono::seconds(10)));
  CHECK(std::filesystem::file_size(path) <= size / 4);
}

TEST_CASE("incident log: the file is compacted when the cap drops most of it", "[incidents]") {
  sbd::testing::TempDir dir("sbd-incidents");
  const std::string path = dir.path() + "/incidents.jsonl";
  IncidentLog log(Spec(path, 5), kT0);
  auto t = kT0;
  log.ObserveRound(Healthy("orders", t), t);
  for (int i = 0; i < 100; ++i) {
    t += std::chrono::seconds(1);
    log.ObserveRound(i % 2 ? Healthy("orders", t) : SplitBrain("orders", t), t);
  }
  CHECK(log.size() == 5);
  REQUIRE(log.Flush(std::chrono::seconds(10)));
  CHECK(LineCount(path) <= 2 * 5 + 16 + 4);
  IncidentLog restarted(Spec(path, 5), t);
  CHECK(restarted.size() == 5);
  CHECK(restarted.dropped() == 0);  // the previous run counted its own drops
  CHECK(restarted.Events().back().time == t);
}

TEST_CASE("incident log: the API filters by cluster, since and limit, newest first",
          "[incidents]") {
  IncidentLog log(Spec(), kT0);
  log.ObserveRound(Healthy("orders", kT0), kT0);
  log.ObserveRound(Healthy("billing", kT0 + std::chrono::seconds(1)), kT0);
  log.ObserveRound(SplitBrain("orders", kT0 + std::chrono::seconds(2)), kT0);
  const auto [status, body] =
      log.HttpGet({{"cluster", "orders"}, {"since", "2027-01-15T08:00:01Z"}, {"limit", "2"}});
  REQUIRE(status == 200);
  const nlohmann::json answer = nlohmann::json::parse(body);
  REQUIRE(answer["events"].size() == 2);
  CHECK(answer["truncated"] == true);
  for (const auto& e : answer["events"]) CHECK(e["cluster"] == "orders");
  CHECK(answer["events"][0]["time"] == "2027-01-15T08:00:02.000Z");
  CHECK(answer["kept"] == 5);
}

TEST_CASE("incident log: invalid API parameters are refused with a reason", "[incidents]") {
  IncidentLog log(Spec(), kT0);
  const std::vector<std::pair<std::multimap<std::string, std::string>, std::string>> cases = {
      {{{"limit", "0"}}, "limit must be a whole number from 1 to 1000"},
      {{{"limit", "1001"}}, "limit must be a whole number from 1 to 1000"},
      {{{"limit", "-1"}}, "limit must be a whole number from 1 to 1000"},
      {{{"since", "yesterday"}}, "since must be an RFC 3339 time like 2026-11-30T06:00:00Z"},
      {{{"cluster", ""}}, "cluster must be a cluster name of 1 to 256 bytes"},
      {{{"cluster", "a"}, {"cluster", "b"}}, "parameter cluster is given more than once"},
      {{{"verbose", "1"}}, "unknown parameter verbose; expected cluster, since or limit"},
  };
  for (const auto& [params, reason] : cases) {
    INFO(reason);
    const auto [status, body] = log.HttpGet(params);
    CHECK(status == 400);
    CHECK(nlohmann::json::parse(body)["error"] == reason);
  }
}

TEST_CASE("incident log: check lists the last events of clusters that are not healthy",
          "[incidents]") {
  sbd::testing::TempDir dir("sbd-incidents");
  const std::string path = dir.path() + "/incidents.jsonl";
  {
    IncidentLog log(Spec(path), kT0);
    log.ObserveRound(Healthy("orders", kT0), kT0);
    log.ObserveRound(SplitBrain("orders", kT0 + std::chrono::seconds(1)), kT0);
  }
  const std::vector<ClusterSnapshot> now = {SplitBrain("orders", kT0), Healthy("billing", kT0),
                                            SplitBrain("fresh", kT0)};
  const std::string text = sbd::IncidentSummaryText(now, Spec(path), 2, kT0);
  CHECK(text.find("2027-01-15T08:00:01.000Z  verdict_changed  healthy -> split_brain") ==
        std::string::npos);  // the third-last event, beyond 2 per cluster
  CHECK(text.find("split_brain_opened") != std::string::npos);
  CHECK(text.find("member_state_changed  pg2 standby -> writable") != std::string::npos);
  CHECK(text.find("billing") == std::string::npos);
  CHECK(text.find("fresh:\n  none recorded") != std::string::npos);
  CHECK(sbd::IncidentSummaryText({Healthy("orders", kT0)}, Spec(path), 2, kT0).empty());
  CHECK(sbd::IncidentSummaryText(now, Spec(), 2, kT0).find("none recorded") != std::string::npos);
}

TEST_CASE("incident log: a hung disk never holds a round, and the writes land afterwards",
          "[incidents]") {
  sbd::testing::TempDir dir("sbd-incidents");
  const std::string path = dir.path() + "/incidents.jsonl";
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> hang{false};
  std::atomic<int> stuck{0};
  auto hung_disk = [&] {
    if (!hang) return;
    ++stuck;
    released.wait();
  };
  // Released on every path, before the future below and the log wait in their destructors.
  struct Releaser {
    std::promise<void>& promise;
    bool done = false;
    void operator()() {
      if (!done) promise.set_value();
      done = true;
    }
    ~Releaser() { (*this)(); }
  };
  IncidentLog log(Spec(path), kT0, sbd::kMaxIncidentFileBytes, hung_disk);
  std::future<void> rounds;
  Releaser releaser{release};
  hang = true;
  // Far more rounds with changes than the writer's queue holds, while the disk hangs.
  constexpr int kRounds = 3 * static_cast<int>(IncidentLog::kMaxQueuedWrites);
  auto t = kT0;
  rounds = std::async(std::launch::async, [&] {
    for (int i = 0; i < kRounds; ++i) {
      t += std::chrono::seconds(1);
      log.ObserveRound(i % 2 ? Healthy("orders", t) : SplitBrain("orders", t), t);
    }
  });
  const bool answered = rounds.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  CHECK(answered);
  CHECK(stuck == 1);  // the first write is still hung
  CHECK(log.size() > static_cast<size_t>(kRounds));
  CHECK_FALSE(log.Flush(std::chrono::milliseconds(0)));
  // The backed-up appends were replaced by one rewrite, and counted.
  CHECK(log.writes_replaced() > 0);
  releaser();
  if (answered) rounds.get();
  REQUIRE(log.Flush(std::chrono::seconds(30)));
  // The file holds exactly what the log keeps, in order.
  CHECK(LineCount(path) == log.size());
  IncidentLog restarted(Spec(path), t);
  CHECK(restarted.size() == log.size());
  CHECK(restarted.Events().back().time == t);
}
