// Witnesses: which member each standby streams from, matched by address, and how /status, the
// text status, the status page and a split-brain summary show it. Synthetic readings only.
#include <catch2/catch.hpp>

#include "detector/output/status.h"
#include "detector/output/status_page.h"
#include "detector/output/witness_views.h"
#include "detector/verdicts/verdict.h"
#include "detector/verdicts/witnesses.h"
#include "tests/support/detector_process.h"
#include "tests/support/html_tidy.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

const std::string kLineage = "7000000000000000001";

MemberSpec Member(const std::string& name, const std::string& address) {
  MemberSpec m;
  m.name = name;
  m.address = address;
  m.dsn = "user=splitbrain";
  return m;
}

WalReceiverReading Receiver(const std::string& host, int port, const std::string& status) {
  WalReceiverReading up;
  up.status = status;
  up.sender_host = host;
  up.sender_port = port;
  up.received_tli = 1;
  up.flushed_lsn = "0/3000148";
  up.latest_end_time = "2026-11-30T12:00:00Z";
  return up;
}

// One reading, all in the same instant: writable, or a standby with `upstream`.
Observation Read(const std::string& member, bool writable,
                 std::optional<WalReceiverReading> upstream = std::nullopt) {
  const auto t0 = SteadyClock::time_point(std::chrono::hours(1));
  Observation obs;
  obs.member = member;
  obs.window = ReadingWindow{WallClock::now(), t0, t0 + std::chrono::milliseconds(5)};
  PostgresReading r;
  r.in_recovery = !writable;
  r.read_only = !writable;
  r.system_identifier = kLineage;
  r.timeline = 1;
  r.backend_pid = 1000 + static_cast<int>(member.back());
  r.postmaster_start = "2026-11-30T00:00:00Z";
  r.upstream = std::move(upstream);
  obs.result = r;
  return obs;
}

// pg-a and pg-b writable; pg-c streams from pg-a, pg-d from a server that is no member, pg-e
// hides its receiver (a role without pg_read_all_stats).
ClusterSnapshot SplitCluster() {
  ClusterSnapshot c;
  c.spec.name = "orders";
  c.spec.members = {Member("pg-a", "10.0.0.1:5432"), Member("pg-b", "10.0.0.2:5432"),
                    Member("pg-c", "10.0.0.3:5432"), Member("pg-d", "10.0.0.4:5432"),
                    Member("pg-e", "10.0.0.5:5432")};
  WalReceiverReading hidden;
  hidden.hidden = true;
  c.last_round = {Read("pg-a", true), Read("pg-b", true),
                  Read("pg-c", false, Receiver("10.0.0.1", 5432, "streaming")),
                  Read("pg-d", false, Receiver("10.9.9.9", 5433, "streaming")),
                  Read("pg-e", false, hidden)};
  for (const auto& obs : c.last_round) {
    RecordObservation(c.history.members[obs.member], obs, WallClock::now());
  }
  c.history.lineage = kLineage;
  c.has_round = true;
  c.rounds = 3;
  c.assessment = Assess(c.spec, c.last_round, c.history, true);
  return c;
}

}  // namespace

TEST_CASE("witness: a sender matches a member by its exact configured host:port", "[witness]") {
  const std::vector<MemberSpec> members = {Member("pg-a", "db-a.example:5432"),
                                           Member("pg-b", "10.0.0.2:5433,10.0.0.9:5433"),
                                           Member("pg-c", "[fd00::3]:5432")};
  CHECK(SenderMember(Receiver("db-a.example", 5432, "streaming"), members) == "pg-a");
  CHECK(SenderMember(Receiver("db-a.example", 5433, "streaming"), members).empty());
  CHECK(SenderMember(Receiver("10.0.0.9", 5433, "streaming"), members) == "pg-b");
  CHECK(SenderMember(Receiver("fd00::3", 5432, "streaming"), members) == "pg-c");
  // No name resolution: the same server under another name is not recognised.
  CHECK(SenderMember(Receiver("127.0.0.1", 5432, "streaming"), {Member("pg-l", "localhost:5432")})
            .empty());
  WalReceiverReading hidden;
  hidden.hidden = true;
  CHECK(SenderAddress(hidden).empty());
  CHECK(SenderMember(hidden, members).empty());
}

TEST_CASE("witness: /status shows whom each member streams from and who streams from each",
          "[witness]") {
  const ClusterSnapshot c = SplitCluster();
  REQUIRE(c.assessment.verdict == Verdict::kSplitBrain);
  const nlohmann::json cluster = StatusJson({c})["clusters"][0];
  INFO(cluster.dump(2));
  CHECK(cluster["witnesses"] ==
        nlohmann::json({{"pg-a", {"pg-c"}}, {"pg-b", nlohmann::json::array()}}));
  const auto& members = cluster["members"];
  CHECK(members[0]["streams_from"].is_null());
  CHECK(members[2]["streams_from"]["from"] == "pg-a");
  CHECK(members[2]["streams_from"]["timeline"] == 1);
  CHECK(members[2]["streams_from"]["flushed_lsn"] == "0/3000148");
  CHECK(members[3]["streams_from"]["from"] == "10.9.9.9:5433");
  CHECK(members[3]["streams_from"]["member"].is_null());
  CHECK(members[4]["streams_from"]["from"] == "hidden");

  const std::string text = StatusText({c});
  INFO(text);
  CHECK(text.find("Witnesses: pg-c streams from pg-a; nobody streams from pg-b\n") !=
        std::string::npos);
  CHECK(c.assessment.summary.find(
            "; witnesses: pg-c streams from pg-a; nobody streams from pg-b: it is on its own") !=
        std::string::npos);

  const std::string page = StatusHtml({c}, nullptr, WallClock::now());
  CHECK(page.find("<th scope=\"col\">Streams from</th>") != std::string::npos);
  CHECK(page.find("<code>10.9.9.9:5433</code> (not a member)") != std::string::npos);
  CHECK(page.find("hidden (the role lacks pg_read_all_stats)") != std::string::npos);
}

TEST_CASE("witness: a standby that is not streaming witnesses nobody", "[witness]") {
  ClusterSnapshot c = SplitCluster();
  c.last_round[2] = Read("pg-c", false, Receiver("10.0.0.1", 5432, "waiting"));
  const nlohmann::json cluster = StatusJson({c})["clusters"][0];
  CHECK(cluster["witnesses"]["pg-a"].empty());
  // A healthy cluster's summary carries no witnesses.
  ClusterSnapshot healthy = SplitCluster();
  healthy.last_round[1] = Read("pg-b", false, Receiver("10.0.0.1", 5432, "streaming"));
  const Assessment a = Assess(healthy.spec, healthy.last_round, healthy.history, false);
  CHECK(a.verdict == Verdict::kHealthy);
  CHECK(a.summary.find("witnesses") == std::string::npos);
}

}  // namespace sbd

namespace sbd {

TEST_CASE("witness views: each witness's primary side by side, the odd one and the stale marked",
          "[witness]") {
  ClusterSnapshot c = SplitCluster();
  // pg-a says it is primary and pg-c streams from it; pg-b alone says pg-b.
  WitnessTable table = WitnessViews(c);
  CHECK(table.majority == "pg-a");
  auto view = [&](const std::string& witness) {
    for (const auto& v : table.views) {
      if (v.witness == witness) return v;
    }
    FAIL("no view of " << witness);
    return WitnessView{};
  };
  CHECK(view("pg-a itself").names == "pg-a");
  CHECK_FALSE(view("pg-a itself").disagrees);
  CHECK(view("pg-b itself").names == "pg-b");
  CHECK(view("pg-b itself").disagrees);
  CHECK(view("pg-c itself").names.empty());  // a standby names nobody, and disagrees with nobody
  CHECK_FALSE(view("pg-c itself").disagrees);
  CHECK(view("pg-c's WAL receiver").names == "pg-a");
  CHECK(table.views.size() == 6);  // five members, one receiver that is a member's

  // A lock store naming pg-b, whose read failed this round: stale, and it does not vote.
  c.lock = LockDescription{"patroni", true, "/service/orders/leader"};
  LockRecord store;
  store.holder = "pg-b";
  c.last_good_dcs = store;
  c.last_dcs = LockRecordResult{ProbeFailure{ProbeFailureReason::kTimeout, "etcd did not answer"}};
  table = WitnessViews(c);
  CHECK(table.majority == "pg-a");
  CHECK(view("the lock store").stale);
  CHECK(view("the lock store").disagrees);
  // Read again, it votes: pg-a and pg-b tie, and with no majority nobody is marked.
  c.last_dcs = LockRecordResult{store};
  table = WitnessViews(c);
  CHECK(table.majority.empty());
  CHECK_FALSE(view("the lock store").stale);
  CHECK_FALSE(view("pg-b itself").disagrees);

  // The same in /status, the text view and the page, in words.
  c.last_dcs = LockRecordResult{ProbeFailure{ProbeFailureReason::kTimeout, "etcd did not answer"}};
  const nlohmann::json cluster = StatusJson({c})["clusters"][0];
  CHECK(cluster["witness_views"]["majority"] == "pg-a");
  const std::string text = StatusText({c});
  CHECK(text.find("pg-b itself: pg-b (disagrees with the majority)") != std::string::npos);
  CHECK(text.find("the lock store: pg-b (disagrees with the majority) (stale, from ") !=
        std::string::npos);
  const std::string html = StatusHtml({c}, nullptr, WallClock::now());
  CHECK(html.find("names as primary (majority: pg-a)") != std::string::npos);
  CHECK(html.find("disagrees with the majority") != std::string::npos);
  CHECK(html.find("stale: this round's read failed") != std::string::npos);
  // The table passes the page's validator and accessibility check ("pg-c's WAL receiver" is a
  // long row header: it needs its short form).
  testing::TempDir dir("sbd-witness-page");
  const auto report =
      testing::TidyHtml(testing::WriteFile(dir.path(), "page.html", html), /*refreshing=*/true);
  INFO(report.output);
  CHECK(report.exit_code == 0);
  CHECK(report.findings.empty());
}

}  // namespace sbd
