// The write window of a split brain from member histories: the fork point from the newest
// timeline's history, WAL each holder wrote since, the double-write window, and every unknown
// value given with its reason rather than as zero.
#include "detector/engine/write_window.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "detector/output/alerts.h"
#include "detector/output/metrics.h"
#include "detector/output/status.h"

namespace sbd {
namespace {

const WallClock::time_point kT0 = WallClock::time_point(std::chrono::seconds(1'700'000'000));

ClusterSpec TwoMembers() {
  ClusterSpec spec;
  spec.name = "demo";
  spec.members.resize(2);
  spec.members[0].name = "pg-a";
  spec.members[1].name = "pg-b";
  return spec;
}

// A member read writable on `timeline` at WAL byte `wal`, writable from `since` to `until`.
MemberHistory Writable(const std::string& name, std::int64_t timeline, std::uint64_t wal, int since,
                       int until) {
  PostgresReading r;
  r.in_recovery = false;
  r.read_only = false;
  r.system_identifier = "7000";
  r.timeline = timeline;
  r.wal_bytes = wal;
  r.wal_lsn = "0/" + std::to_string(wal);
  Observation obs;
  obs.member = name;
  obs.result = r;
  MemberHistory h;
  h.last = obs;
  h.last_reading = r;
  h.writable_since = kT0 + std::chrono::seconds(since);
  h.last_seen_writable = kT0 + std::chrono::seconds(until);
  return h;
}

ClusterHistory History(MemberHistory a, MemberHistory b) {
  ClusterHistory history;
  history.lineage = "7000";
  history.members["pg-a"] = std::move(a);
  history.members["pg-b"] = std::move(b);
  return history;
}

}  // namespace

TEST_CASE("write window: none outside an incident", "[write_window]") {
  const auto history = History(Writable("pg-a", 1, 100, 0, 10), Writable("pg-b", 2, 50, 4, 10));
  CHECK_FALSE(AssessWriteWindow(TwoMembers(), history, false).has_value());
}

TEST_CASE("write window: each holder's WAL counts from the switch its timeline took",
          "[write_window]") {
  MemberHistory b = Writable("pg-b", 2, 0x3000148 + 500, 4, 10);
  auto& reading = std::get<PostgresReading>(b.last->result);
  reading.timeline_history = {{1, 0x3000148, "0/3000148"}};
  auto history = History(Writable("pg-a", 1, 0x3000148 + 7000, 0, 10), b);
  const auto w = AssessWriteWindow(TwoMembers(), history, true);
  REQUIRE(w.has_value());
  CHECK(w->fork_lsn == "0/3000148");
  CHECK(w->fork_timeline == 2);
  REQUIRE(w->holders.size() == 2);
  CHECK(w->holders[0].member == "pg-a");
  CHECK(w->holders[0].wal_bytes_since_fork == std::optional<std::uint64_t>(7000));
  CHECK(w->holders[1].wal_bytes_since_fork == std::optional<std::uint64_t>(500));
  REQUIRE(w->double_write_seconds.has_value());
  CHECK(*w->double_write_seconds == Approx(6.0));
}

TEST_CASE("write window: an unreadable history leaves the counts unknown with its reason",
          "[write_window]") {
  MemberHistory b = Writable("pg-b", 2, 500, 4, 10);
  std::get<PostgresReading>(b.last->result).timeline_history_error = "permission denied";
  const auto w = AssessWriteWindow(TwoMembers(), History(Writable("pg-a", 1, 900, 0, 10), b), true);
  REQUIRE(w.has_value());
  CHECK(w->fork_lsn.empty());
  CHECK(w->fork_unknown_reason == "fork point unknown: permission denied");
  for (const auto& h : w->holders) {
    CHECK_FALSE(h.wal_bytes_since_fork.has_value());
    CHECK(h.unknown_reason == "fork point unknown: permission denied");
  }
  CHECK(w->double_write_seconds.has_value());
}

TEST_CASE("write window: two writable on one timeline have no fork point", "[write_window]") {
  const auto w = AssessWriteWindow(
      TwoMembers(), History(Writable("pg-a", 3, 900, 0, 10), Writable("pg-b", 3, 800, 2, 10)),
      true);
  REQUIRE(w.has_value());
  CHECK(w->fork_unknown_reason ==
        "fork point unknown: every writable member is on timeline 3, so no timeline switch parts "
        "them");
  CHECK_FALSE(w->holders[0].wal_bytes_since_fork.has_value());
}

TEST_CASE("write window: a holder behind the point its timeline ended is not counted",
          "[write_window]") {
  MemberHistory b = Writable("pg-b", 3, 9000, 4, 10);
  std::get<PostgresReading>(b.last->result).timeline_history = {{1, 100, "0/64"}, {2, 200, "0/C8"}};
  // pg-a reads behind where timeline 1 ended (0/64): no count, and pg-b's own still holds.
  const auto w = AssessWriteWindow(TwoMembers(), History(Writable("pg-a", 1, 50, 0, 10), b), true);
  REQUIRE(w.has_value());
  CHECK(w->fork_lsn == "0/C8");
  CHECK(w->holders[0].unknown_reason == "its WAL position 0/50 is behind the switch point 0/64");
  CHECK(w->holders[1].wal_bytes_since_fork == std::optional<std::uint64_t>(8800));
}

}  // namespace sbd

namespace sbd {
namespace {

// An open incident whose write window knows pg-a's count (3 MiB + 1) but not pg-b's.
ClusterSnapshot Incident() {
  ClusterSnapshot c;
  c.spec = TwoMembers();
  c.has_round = true;
  c.split_brain_open = true;
  c.assessment.verdict = Verdict::kSplitBrain;
  WriteWindow w;
  w.fork_lsn = "0/3000148";
  w.fork_timeline = 2;
  w.double_write_seconds = 12.5;
  HolderWrites a;
  a.member = "pg-a";
  a.first_writable = kT0;
  a.wal_bytes_since_fork = 3 * 1024 * 1024 + 1;
  HolderWrites b;
  b.member = "pg-b";
  b.first_writable = kT0 + std::chrono::seconds(4);
  b.unknown_reason = "its WAL position 0/1 is behind the switch point 0/3000148";
  w.holders = {a, b};
  c.write_window = w;
  return c;
}

}  // namespace

TEST_CASE("write window: the page rounds WAL down to a power of two and names the unknown",
          "[write_window]") {
  const auto alerts = AlertsFor(Incident(), AlertingSpec{}, AlertLinks{});
  REQUIRE(alerts.size() == 1);
  const std::string& description = alerts.front().annotations.at("description");
  CHECK(description.find("Write window: fork at 0/3000148 (timeline 2); two writable since " +
                         FormatTime(kT0 + std::chrono::seconds(4)) + ", under 30 s so far.") !=
        std::string::npos);
  CHECK(description.find("pg-a: at least 2 MiB of WAL since the fork.") != std::string::npos);
  CHECK(description.find("pg-b: WAL since the fork unknown (its WAL position 0/1 is behind") !=
        std::string::npos);
}

TEST_CASE(
    "write window: each resend of the page carries the double-write time so far and each "
    "holder's WAL, changing once per resend interval",
    "[write_window]") {
  AlertingSpec alerting;
  alerting.resend_interval = Millis(20000);
  ClusterSnapshot c = Incident();
  auto description = [&](double seconds, std::uint64_t wal_a) {
    c.write_window->double_write_seconds = seconds;
    c.write_window->holders[0].wal_bytes_since_fork = wal_a;
    return AlertsFor(c, alerting, AlertLinks{}).front().annotations.at("description");
  };
  const std::string at_95 = description(95, 5000);
  CHECK(at_95.find(", at least 80 s so far.") != std::string::npos);
  CHECK(at_95.find("pg-a: at least 4 KiB of WAL since the fork.") != std::string::npos);
  CHECK(at_95.find("pg-b: WAL since the fork unknown (") != std::string::npos);
  // Rounds within one interval leave the description alone: the pusher sends nothing new.
  CHECK(description(99.9, 5000) == at_95);
  // The next interval, and WAL that doubled, change it: the next push carries both.
  const std::string at_100 = description(100, 9000);
  CHECK(at_100.find(", at least 100 s so far.") != std::string::npos);
  CHECK(at_100.find("pg-a: at least 8 KiB of WAL since the fork.") != std::string::npos);
}

TEST_CASE("write window: metrics exist only for known values, and only during an incident",
          "[write_window]") {
  ClusterSnapshot c = Incident();
  std::string text = RenderMetrics(DetectorCollector([&] { return std::vector{c}; }, nullptr));
  CHECK(text.find("splitbrain_incident_wal_bytes_since_fork{cluster=\"demo\",member=\"pg-a\"} "
                  "3145729") != std::string::npos);
  CHECK(text.find("member=\"pg-b\"} ") == std::string::npos);
  CHECK(text.find("splitbrain_incident_double_write_seconds{cluster=\"demo\"} 12.5") !=
        std::string::npos);
  c.write_window.reset();
  text = RenderMetrics(DetectorCollector([&] { return std::vector{c}; }, nullptr));
  CHECK(text.find("splitbrain_incident_wal_bytes_since_fork{") == std::string::npos);
  CHECK(text.find("splitbrain_incident_double_write_seconds{") == std::string::npos);
}

TEST_CASE("write window: /status gives each count or its reason, never a zero", "[write_window]") {
  const nlohmann::json cluster = StatusJson({Incident()})["clusters"][0];
  CHECK(cluster["write_window"]["fork_lsn"] == "0/3000148");
  CHECK(cluster["write_window"]["double_write_seconds"] == 12.5);
  CHECK(cluster["members"][0]["wal_bytes_since_fork"] == 3 * 1024 * 1024 + 1);
  CHECK_FALSE(cluster["members"][1].contains("wal_bytes_since_fork"));
  CHECK(cluster["write_window"]["holders"][1]["wal_bytes_since_fork_unknown_reason"] ==
        "its WAL position 0/1 is behind the switch point 0/3000148");
  CHECK(StatusText({Incident()})
            .find("Write window: fork at 0/3000148 (timeline 2); two "
                  "writable for 12s; pg-a: 3145729 bytes") != std::string::npos);
}

}  // namespace sbd

namespace sbd {
namespace {

// A Redis master at `offset` of replication id `replid`, continued from `replid2` when set.
MemberHistory RedisMaster(const std::string& name, const std::string& replid,
                          const std::string& replid2, std::int64_t second_offset,
                          std::int64_t offset, int since, int until) {
  RedisReading r;
  r.role = "master";
  r.master_replid = replid;
  r.master_replid2 = replid2;
  r.second_repl_offset = second_offset;
  r.master_repl_offset = offset;
  Observation obs;
  obs.member = name;
  obs.result = r;
  MemberHistory h;
  h.last = obs;
  h.last_claim = ClaimOf(r);
  h.writable_since = kT0 + std::chrono::seconds(since);
  h.last_seen_writable = kT0 + std::chrono::seconds(until);
  return h;
}

}  // namespace

TEST_CASE("write window: Redis counts the replication stream since the promotion",
          "[write_window]") {
  ClusterHistory history;
  history.lineage = "aaaa";
  // pg-a kept replid aaaa and went on to offset 5000; pg-b was promoted when the stream was at
  // 4000 (Redis records 4001) and has written up to 4600 under its new id bbbb.
  history.members["pg-a"] = RedisMaster("pg-a", "aaaa", "", -1, 5000, 0, 20);
  history.members["pg-b"] = RedisMaster("pg-b", "bbbb", "aaaa", 4001, 4600, 5, 20);
  const auto window = AssessWriteWindow(TwoMembers(), history, true);
  REQUIRE(window.has_value());
  REQUIRE(window->fork_repl_offset.has_value());
  CHECK(*window->fork_repl_offset == 4000);
  CHECK(window->ForkPoint() == "replication offset 4000");
  CHECK(window->written == "replication stream");
  REQUIRE(window->holders.size() == 2);
  CHECK(window->holders[0].wal_bytes_since_fork == std::optional<std::uint64_t>(1000));
  CHECK(window->holders[1].wal_bytes_since_fork == std::optional<std::uint64_t>(600));
  REQUIRE(window->double_write_seconds.has_value());
  CHECK(*window->double_write_seconds == Approx(15.0));

  // A master of an unrelated replication id is not part of the window.
  history.members["pg-b"] = RedisMaster("pg-b", "cccc", "", -1, 900, 5, 20);
  const auto drift = AssessWriteWindow(TwoMembers(), history, true);
  REQUIRE(drift.has_value());
  REQUIRE(drift->holders.size() == 1);
  CHECK(drift->holders[0].member == "pg-a");
  CHECK_FALSE(drift->holders[0].wal_bytes_since_fork.has_value());
  CHECK_FALSE(drift->holders[0].unknown_reason.empty());
}

}  // namespace sbd
