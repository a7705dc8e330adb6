// The /metrics families built from scheduler snapshots, rendered as Prometheus text.
#include "detector/output/metrics.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "detector/common/network_text.h"
#include "tests/support/detector_process.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

ClusterSnapshot Cluster(const std::string& name, std::uint64_t rounds) {
  ClusterSnapshot c;
  c.spec.name = name;
  c.rounds = rounds;
  return c;
}

TEST_CASE("metrics: a repeated label set is exported once, the first standing", "[metrics]") {
  // Two snapshots under one name (which a valid config never gives) would otherwise repeat
  // every series of the cluster, and Prometheus rejects the whole scrape for one repeat.
  const std::vector<ClusterSnapshot> clusters = {Cluster("orders", 3), Cluster("billing", 5),
                                                 Cluster("orders", 7)};
  const std::string text = RenderMetrics(DetectorCollector([&] { return clusters; }, nullptr));
  CHECK(Count(text, "splitbrain_rounds_total{cluster=\"orders\"}") == 1);
  CHECK(text.find("splitbrain_rounds_total{cluster=\"orders\"} 3\n") != std::string::npos);
  CHECK(text.find("splitbrain_rounds_total{cluster=\"billing\"} 5\n") != std::string::npos);
  CHECK(Count(text, "splitbrain_cluster_info{cluster=\"orders\"") == 1);
  // The order of the first appearances is kept.
  CHECK(text.find("splitbrain_rounds_total{cluster=\"orders\"}") <
        text.find("splitbrain_rounds_total{cluster=\"billing\"}"));
}

// `text` passed to `promtool check metrics`: its exit code, and what it said.
testing::CommandResult Promtool(const std::string& text) {
  testing::TempDir dir("sbd-metrics");
  const std::string file = testing::WriteFile(dir.path(), "metrics.txt", text);
  return testing::RunCommand({"sh", "-c", "promtool check metrics < " + file});
}

TEST_CASE("metrics: a name with invalid UTF-8 from the lock store leaves the scrape valid",
          "[metrics]") {
  // A member, its holder and its lineage as a hostile DCS and server could write them, before
  // any entry point cleaned them: the output must stay valid on its own.
  const std::string bad = "bad\xff\xfename";
  ClusterSnapshot c = Cluster("patroni-main", 4);
  c.spec.scope = "scope\xc0\xaf";
  c.lock = {"patroni", true, "/service/main/leader"};
  MemberSpec member;
  member.name = bad;
  member.address = "127.0.0.1:5432";
  c.spec.members.push_back(member);
  c.counters[bad].rest_failures_by_reason["timeout"] = 2;
  Observation obs;
  obs.member = bad;
  PostgresReading reading;
  reading.in_recovery = false;
  reading.read_only = false;
  reading.system_identifier = "7000\xfe";
  reading.timeline = 1;
  obs.result = reading;
  RecordObservation(c.history.members[bad], obs, WallClock::now());
  c.has_round = true;
  c.assessment.lock_readable = true;
  c.assessment.lock_holder = bad;
  LockRecord dcs;
  dcs.holder = bad;
  c.last_good_dcs = dcs;
  const std::vector<ClusterSnapshot> clusters = {c};
  const std::string text = RenderMetrics(DetectorCollector([&] { return clusters; }, nullptr));

  CHECK(IsValidUtf8(text, text.size()));
  const std::string shown = "bad\xef\xbf\xbd\xef\xbf\xbdname";
  CHECK(text.find("splitbrain_member_up{cluster=\"patroni-main\",member=\"" + shown + "\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("splitbrain_lock_holder_info{cluster=\"patroni-main\",holder=\"" + shown +
                  "\"} 1\n") != std::string::npos);
  const auto lint = Promtool(text);
  INFO(lint.output);
  CHECK(lint.exit_code == 0);
}

TEST_CASE("metrics: a label value past the bound is cut on a character with a marker",
          "[metrics]") {
  ClusterSnapshot c = Cluster("orders", 1);
  c.has_round = true;
  // 3-byte characters, so that the bound falls inside one.
  std::string lineage;
  while (lineage.size() < 3 * kMaxLabelValueBytes) lineage += "\xe2\x82\xac";
  c.assessment.writable_per_lineage[lineage] = 2;
  const std::vector<ClusterSnapshot> clusters = {c};
  const std::string text = RenderMetrics(DetectorCollector([&] { return clusters; }, nullptr));
  const std::string prefix =
      "splitbrain_cluster_writable_members{cluster=\"orders\",system_identifier=\"";
  const size_t start = text.find(prefix);
  REQUIRE(start != std::string::npos);
  const size_t value_start = start + prefix.size();
  const std::string value = text.substr(value_start, text.find('"', value_start) - value_start);
  CHECK(value.size() <= kMaxLabelValueBytes);
  CHECK(value.size() > kMaxLabelValueBytes - 6);
  CHECK(value.substr(value.size() - 3) == "\xe2\x80\xa6");  // the marker: U+2026
  CHECK(IsValidUtf8(value, kMaxLabelValueBytes));
  const auto lint = Promtool(text);
  INFO(lint.output);
  CHECK(lint.exit_code == 0);
}

}  // namespace
}  // namespace sbd
