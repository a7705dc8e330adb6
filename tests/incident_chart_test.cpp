// The status page's incident chart: lanes built from the incident log's events (in any order,
// from a log that starts mid-incident, for members with no event), and what it draws.
#include "detector/output/incident_chart.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>

#include "detector/output/status_page.h"

namespace sbd {
namespace {

using std::chrono::seconds;

const WallClock::time_point kT0 = WallClock::from_time_t(1800000000);  // 2027-01-15T08:00:00Z

IncidentEvent Event(int at, const std::string& kind, nlohmann::json fields) {
  return IncidentEvent{kT0 + seconds(at), "orders", kind, std::move(fields)};
}

IncidentEvent Change(int at, const std::string& member, const std::string& from,
                     const std::string& to) {
  return Event(at, "member_state_changed", {{"member", member}, {"from", from}, {"to", to}});
}

// pg-a the primary throughout; pg-b promoted at +58 s, the verdict split_brain from +60 s.
std::vector<IncidentEvent> SplitBrainLog() {
  return {Event(0, "cluster_added",
                {{"verdict", "healthy"}, {"members", {{"pg-a", "writable"}, {"pg-b", "standby"}}}}),
          Change(58, "pg-b", "standby", "writable"),
          Event(60, "verdict_changed", {{"from", "healthy"}, {"to", "split_brain"}})};
}

const std::vector<ChartMember> kMembers = {{"pg-a", "writable"}, {"pg-b", "writable"}};

struct Stretch {
  int from, to;
  std::string state;
  bool operator==(const Stretch& o) const {
    return from == o.from && to == o.to && state == o.state;
  }
};

// A lane as seconds from kT0, for comparing.
std::vector<Stretch> Stretches(const MemberLane& lane) {
  std::vector<Stretch> out;
  for (const LaneInterval& i : lane.intervals) {
    out.push_back({static_cast<int>((i.from - kT0) / seconds(1)),
                   static_cast<int>((i.to - kT0) / seconds(1)), i.state_name});
  }
  return out;
}

}  // namespace

TEST_CASE("incident chart: an open split brain spans a lead before the onset until now",
          "[incident_chart]") {
  const auto span = FindIncident(SplitBrainLog(), "split_brain", kT0 + seconds(120));
  REQUIRE(span);
  CHECK(span->onset == kT0 + seconds(60));
  CHECK(span->onset_known);
  CHECK_FALSE(span->end);
  CHECK(span->verdict == "split_brain");
  CHECK(span->from == kT0 + seconds(30));  // half a minute before (a fifth of 60 s is less)
  CHECK(span->to == kT0 + seconds(120));
}

TEST_CASE("incident chart: each member's lane follows its state changes", "[incident_chart]") {
  const auto lanes = BuildLanes(SplitBrainLog(), kMembers, kT0 + seconds(30), kT0 + seconds(120));
  REQUIRE(lanes.size() == 2);
  CHECK(lanes[0].member == "pg-a");
  CHECK(Stretches(lanes[0]) == std::vector<Stretch>{{30, 120, "writable"}});
  CHECK(Stretches(lanes[1]) == std::vector<Stretch>{{30, 58, "standby"}, {58, 120, "writable"}});
  CHECK(lanes[1].intervals[0].state == LaneState::kNotWritable);
  CHECK(lanes[1].intervals[1].state == LaneState::kWritable);
  const auto both = DoubleWritable(lanes);
  REQUIRE(both.size() == 1);
  CHECK(both[0].first == kT0 + seconds(58));
  CHECK(both[0].second == kT0 + seconds(120));
}

TEST_CASE("incident chart: events out of order give the same lanes and span", "[incident_chart]") {
  std::vector<IncidentEvent> shuffled = SplitBrainLog();
  shuffled.push_back(Change(90, "pg-a", "writable", "unreadable"));
  const auto expected = BuildLanes(shuffled, kMembers, kT0 + seconds(30), kT0 + seconds(120));
  std::mt19937 random(7);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(shuffled.begin(), shuffled.end(), random);
    const auto lanes = BuildLanes(shuffled, kMembers, kT0 + seconds(30), kT0 + seconds(120));
    REQUIRE(lanes.size() == 2);
    CHECK(Stretches(lanes[0]) == Stretches(expected[0]));
    CHECK(Stretches(lanes[1]) == Stretches(expected[1]));
    const auto span = FindIncident(shuffled, "split_brain", kT0 + seconds(120));
    REQUIRE(span);
    CHECK(span->onset == kT0 + seconds(60));
  }
  CHECK(Stretches(expected[0]) ==
        std::vector<Stretch>{{30, 90, "writable"}, {90, 120, "unreadable"}});
  CHECK(expected[0].intervals[1].state == LaneState::kUnreachable);
}

TEST_CASE("incident chart: a log that starts inside the incident still charts it, onset unknown",
          "[incident_chart]") {
  // No cluster_added: the first events are a change and a verdict leaving split_brain.
  const std::vector<IncidentEvent> truncated = {
      Event(20, "verdict_changed", {{"from", "split_brain"}, {"to", "unknown"}}),
      Change(10, "pg-b", "standby", "writable")};
  const auto span = FindIncident(truncated, "unknown", kT0 + seconds(40));
  REQUIRE(span);
  CHECK(span->onset == kT0 + seconds(10));
  CHECK_FALSE(span->onset_known);
  CHECK(span->verdict == "split_brain");
  const std::vector<ChartMember> members = {{"pg-a", "unknown (timeout)"}, {"pg-b", "writable"}};
  const auto lanes = BuildLanes(truncated, members, span->from, span->to);
  REQUIRE(lanes.size() == 2);
  // pg-a has no event: it kept the state it has now since the log's first event.
  CHECK(Stretches(lanes[0]) ==
        std::vector<Stretch>{{-20, 10, "no record"}, {10, 40, "unknown (timeout)"}});
  CHECK(lanes[0].intervals[0].state == LaneState::kNoData);
  CHECK(lanes[0].intervals[1].state == LaneState::kUnreachable);
  CHECK(Stretches(lanes[1]) == std::vector<Stretch>{{-20, 10, "no record"}, {10, 40, "writable"}});
}

TEST_CASE(
    "incident chart: a member no event names keeps its state now; one only events name "
    "gets a lane",
    "[incident_chart]") {
  std::vector<IncidentEvent> log = SplitBrainLog();
  log.push_back(Change(70, "pg-old", "standby", "removed"));
  const std::vector<ChartMember> members = {
      {"pg-a", "writable"}, {"pg-b", "writable"}, {"pg-new", "replica"}};
  const auto lanes = BuildLanes(log, members, kT0 + seconds(30), kT0 + seconds(120));
  REQUIRE(lanes.size() == 4);
  CHECK(lanes[2].member == "pg-new");
  CHECK(Stretches(lanes[2]) == std::vector<Stretch>{{30, 120, "replica"}});
  CHECK(lanes[3].member == "pg-old");
  CHECK(Stretches(lanes[3]) == std::vector<Stretch>{{30, 70, "standby"}, {70, 120, "removed"}});
  CHECK(lanes[3].intervals[1].state == LaneState::kNoData);
}

TEST_CASE("incident chart: fields of the wrong type are ignored, never thrown on",
          "[incident_chart]") {
  std::vector<IncidentEvent> log = SplitBrainLog();
  log.push_back(Event(61, "member_state_changed", {{"member", 7}, {"to", nullptr}}));
  log.push_back(Event(62, "member_state_changed", nlohmann::json::array({1, 2})));
  log.push_back(Event(63, "cluster_added", {{"verdict", 3}, {"members", "pg-a"}}));
  log.push_back(Event(64, "verdict_changed", nlohmann::json("split_brain")));
  std::string html;
  REQUIRE_NOTHROW(
      html = IncidentChartHtml("orders", "split_brain", kMembers, log, kT0 + seconds(120), 0));
  CHECK(html.find("<svg") != std::string::npos);
}

TEST_CASE("incident chart: nothing to chart when healthy, or the incident ended long ago",
          "[incident_chart]") {
  CHECK(IncidentChartHtml("orders", "healthy", kMembers, {}, kT0, 0).empty());
  CHECK(IncidentChartHtml("orders", "split_brain", kMembers, {}, kT0, 0).empty());
  std::vector<IncidentEvent> log = SplitBrainLog();
  log.push_back(Event(100, "verdict_changed", {{"from", "split_brain"}, {"to", "healthy"}}));
  CHECK(IncidentChartHtml("orders", "healthy", kMembers, log, kT0 + std::chrono::minutes(20), 0)
            .empty());
  const auto span = FindIncident(log, "healthy", kT0 + std::chrono::minutes(5));
  REQUIRE(span);
  REQUIRE(span->end);
  CHECK(*span->end == kT0 + seconds(100));
  CHECK(span->to == kT0 + seconds(130));
  const std::string html =
      IncidentChartHtml("orders", "healthy", kMembers, log, kT0 + std::chrono::minutes(5), 0);
  CHECK(html.find(">over</text>") != std::string::npos);
  CHECK(html.find("over at 08:01:40 UTC") != std::string::npos);
}

TEST_CASE("incident chart: the SVG has a title, a description, the onset and a labelled axis",
          "[incident_chart]") {
  const std::string html =
      IncidentChartHtml("orders", "split_brain", kMembers, SplitBrainLog(), kT0 + seconds(120), 3);
  CHECK(html.find("<svg role=\"img\" ") != std::string::npos);
  CHECK(html.find("<title>Who was writable when in orders</title>") != std::string::npos);
  CHECK(html.find("<desc>Incident in orders (split_brain): onset 08:01:00 UTC, "
                  "still open; two or more members writable for 62 s in all.") !=
        std::string::npos);
  CHECK(html.find(">onset</text>") != std::string::npos);
  // Ticks every 15 s from the onset: UTC above, seconds from the onset below.
  CHECK(html.find(">08:01:00</text>") != std::string::npos);
  CHECK(html.find(">+15 s</text>") != std::string::npos);
  CHECK(html.find(">-30 s</text>") != std::string::npos);
  CHECK(html.find(">UTC</text>") != std::string::npos);
  // Colour is not the only carrier: the same intervals as a (visually hidden) list.
  CHECK(html.find("<ul class=\"vh\">") != std::string::npos);
  CHECK(html.find("<li>pg-b: standby 08:00:30 to 08:00:58 (28 s); writable 08:00:58 to now "
                  "(62 s).</li>") != std::string::npos);
  CHECK(html.find("<li>Two or more writable: 08:00:58 to 08:02:00 (62 s).</li>") !=
        std::string::npos);
  CHECK(html.find("fill=\"url(#ic-3-hatch)\"") != std::string::npos);  // the legend's
}

TEST_CASE("incident chart: an incident weeks long still gets a handful of ticks",
          "[incident_chart]") {
  const std::vector<IncidentEvent> log = {
      Event(0, "verdict_changed", {{"from", "healthy"}, {"to", "unknown"}})};
  const std::string html =
      IncidentChartHtml("orders", "unknown", kMembers, log, kT0 + std::chrono::hours(24 * 40), 0);
  size_t ticks = 0;
  for (size_t at = html.find("stroke=\"#ccc\"/><text"); at != std::string::npos;
       at = html.find("stroke=\"#ccc\"/><text", at + 1)) {
    ++ticks;
  }
  CHECK(ticks >= 3);
  CHECK(ticks <= 13);
}

TEST_CASE("incident chart: hostile cluster, member and state names are escaped",
          "[incident_chart]") {
  const std::string evil = "<script>alert(1)</script>\"'&\xC3\x28";
  std::vector<IncidentEvent> log = SplitBrainLog();
  log.push_back(Change(65, evil, "standby", "<b>writable</b>"));
  log.push_back(Change(66, std::string(60, 'n') + "\xE2\x82\xAC" + "tail", "standby", "writable"));
  const std::string html =
      IncidentChartHtml(evil, "split_brain", {{evil, "<i>x</i>"}}, log, kT0 + seconds(120), 0);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<b>writable") == std::string::npos);
  CHECK(html.find("<i>") == std::string::npos);
  CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;\xEF\xBF\xBD(") !=
        std::string::npos);
  CHECK(html.find("&lt;b&gt;writable&lt;/b&gt;") != std::string::npos);
  // A long name is cut for its lane label, whole in the list.
  CHECK(html.find(">" + std::string(22, 'n') + "\u2026</text>") != std::string::npos);
  CHECK(html.find(std::string(60, 'n') + "\xE2\x82\xAC" + "tail: ") != std::string::npos);
}

TEST_CASE("incident chart: the status page charts a cluster in an incident from the log",
          "[incident_chart]") {
  const nlohmann::json status = {
      {"clusters",
       {{{"name", "orders"},
         {"verdict", "split_brain"},
         {"members",
          {{{"name", "pg-a"}, {"state", "writable"}}, {{"name", "pg-b"}, {"state", "writable"}}}}},
        {{"name", "billing"},
         {"verdict", "healthy"},
         {"verdict_since", "2027-01-15T07:00:00Z"},
         {"members", {{{"name", "pg-c"}, {"state", "writable"}}}}}}}};
  std::set<std::string> asked;
  const IncidentEventSource source = [&](const std::set<std::string>& clusters) {
    asked = clusters;
    return SplitBrainLog();
  };
  const std::string page = StatusHtmlFromJson(status, kT0 + seconds(120), {source});
  CHECK(asked == std::set<std::string>{"orders"});  // billing has been healthy for an hour
  CHECK(page.find("Incident timeline") != std::string::npos);
  CHECK(page.find("Who was writable when in orders") != std::string::npos);
  CHECK(page.find("Writable members of billing") != std::string::npos);  // the streaks
  CHECK(page.find("Writable members of orders") == std::string::npos);
  // Without the log, the streaks as before.
  CHECK(StatusHtmlFromJson(status, kT0 + seconds(120)).find("Writable members of orders") !=
        std::string::npos);
}

}  // namespace sbd
