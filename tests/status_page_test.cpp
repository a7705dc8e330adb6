// The status page (GET /) rendered from synthetic snapshots: what it shows, in what order,
// that nothing hostile becomes markup, and that it is served behind the exporter's auth.
#include "detector/output/status_page.h"

#include <crypt.h>
#include <httplib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "detector/common/json_text.h"
#include "detector/common/network_text.h"
#include "detector/output/alerts.h"
#include "detector/output/exporter.h"
#include "detector/output/metrics.h"
#include "detector/output/status.h"
#include "tests/support/bcrypt.h"
#include "tests/support/detector_process.h"
#include "tests/support/html_tidy.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

using std::chrono::seconds;

const char* kInlinePassword = "inline-Pa55word-never-shown";
const char* kHostile = "<script>alert(\"x\")</script>&'\"<img src=x onerror=alert(1)>";

MemberSpec Member(const std::string& name) {
  MemberSpec m;
  m.name = name;
  m.address = "127.0.0.1:5432";
  m.dsn = "host=127.0.0.1 port=5432 user=splitbrain";
  m.inline_password = kInlinePassword;
  return m;
}

// A member read `ago` before `now`: writable or a replica, on timeline `timeline`.
MemberHistory Read(bool writable, WallClock::time_point now, seconds ago, int timeline = 1) {
  PostgresReading r;
  r.in_recovery = !writable;
  r.read_only = !writable;
  r.system_identifier = "7301234567890123456";
  r.timeline = timeline;
  r.wal_lsn = "0/3000060";
  Observation obs;
  obs.window = {now - ago, SteadyClock::now(), SteadyClock::now()};
  obs.result = r;
  MemberHistory h;
  h.last = obs;
  h.last_reading = r;
  h.last_ok = now - ago;
  if (writable) {
    h.writable_since = now - seconds(20);
    h.last_seen_writable = now - ago;
  }
  return h;
}

// A cluster of `members` with a finished round giving `verdict`; the first is writable, and
// every member when the verdict is a split brain.
ClusterSnapshot Cluster(const std::string& name, Verdict verdict,
                        const std::vector<std::string>& members, WallClock::time_point now) {
  ClusterSnapshot c;
  c.spec.name = name;
  c.spec.probe_interval = std::chrono::milliseconds(500);
  for (const auto& m : members) c.spec.members.push_back(Member(m));
  c.has_round = true;
  c.rounds = 12;
  c.assessment.verdict = verdict;
  c.assessment.raw_verdict = verdict;
  c.assessment.summary = std::string("summary of ") + VerdictName(verdict);
  c.assessment.lineage = "7301234567890123456";
  for (size_t i = 0; i < members.size(); ++i) {
    const bool writable = i == 0 || verdict == Verdict::kSplitBrain;
    c.history.members[members[i]] = Read(writable, now, seconds(1), writable && i > 0 ? 2 : 1);
    if (writable) c.assessment.writable.push_back(members[i]);
  }
  c.verdict_since = now - seconds(5);
  c.last_round_end = now - seconds(1);
  return c;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// True when `at` lies inside a <details> element.
bool InsideDetails(const std::string& html, size_t at) {
  const std::string before = html.substr(0, at);
  return Count(before, "<details>") > Count(before, "</details>");
}

size_t ArticleOf(const std::string& html, const std::string& name) {
  return html.find("<span class=\"name\">" + name + "</span>");
}

using testing::Bcrypt;

// Runs tests/check-status-html over `html`; its report on failure.
void CheckWellFormed(const std::string& html) {
  testing::TempDir dir("sbd-status-page");
  const std::string file = testing::WriteFile(dir.path(), "page.html", html);
  auto run = testing::RunCommand({SBD_SOURCE_DIR "/tests/check-status-html", file});
  INFO(run.output);
  CHECK(run.exit_code == 0);
}

}  // namespace

TEST_CASE("status page: every verdict shows as words and its name, with every member",
          "[status_page]") {
  const auto now = WallClock::now();
  std::vector<ClusterSnapshot> clusters;
  for (Verdict v : AllVerdicts()) {
    clusters.push_back(Cluster(std::string("c-") + VerdictName(v), v, {"m1", "m2"}, now));
  }
  ClusterSnapshot pending;
  pending.spec.name = "c-pending";
  pending.spec.members = {Member("p1")};
  clusters.push_back(pending);
  const std::string html = StatusHtml(clusters, nullptr, now);
  for (const char* words : {"Healthy", "Suppressed", "Unknown", "No primary", "Lineage drift",
                            "Suspected split brain", "Split brain", "Pending"}) {
    CHECK(html.find(std::string(" ") + words + "</span>") != std::string::npos);
  }
  for (Verdict v : AllVerdicts()) {
    CHECK(html.find(std::string("<code class=\"verdict\">") + VerdictName(v) + "</code>") !=
          std::string::npos);
  }
  CHECK(html.find(">m1</th>") != std::string::npos);
  // A cluster without a round yet has no members in /status, and says why.
  CHECK(html.find("no round finished yet") != std::string::npos);
  CHECK(html.find("<meta http-equiv=\"refresh\" content=\"5\">") != std::string::npos);
  // One inline SVG per cluster, each titled; a split brain's writable streaks in red.
  CHECK(Count(html, "<svg ") == clusters.size());
  CHECK(Count(html, "</title>") == clusters.size() + 1);
  CHECK(html.find("fill=\"#c9302c\"") != std::string::npos);
  // Identity: the short system identifier with the whole on hover, the timeline.
  CHECK(html.find("<code title=\"7301234567890123456\">\u2026123456</code>") != std::string::npos);
  CheckWellFormed(html);
}

TEST_CASE("status page: a problem links to the runbook its alert names, one that exists",
          "[status_page]") {
  const auto now = WallClock::now();
  const std::string html = StatusHtml({Cluster("orders", Verdict::kSplitBrain, {"m1", "m2"}, now),
                                       Cluster("billing", Verdict::kHealthy, {"m1"}, now)},
                                      nullptr, now);
  CHECK(html.find("<a href=\"runbooks/split-brain.md\">") < ArticleOf(html, "billing"));
  CHECK(Count(html, "href=\"runbooks/") == 1);  // a healthy cluster needs none
  // Every runbook the page can link to ships in runbooks/.
  for (Verdict v : AllVerdicts()) {
    const std::string page = StatusHtml({Cluster("c", v, {"m1", "m2"}, now)}, nullptr, now);
    const size_t at = page.find("href=\"runbooks/");
    if (at == std::string::npos) continue;
    const size_t start = at + std::string("href=\"runbooks/").size();
    const std::string file = page.substr(start, page.find('"', start) - start);
    INFO(file);
    CHECK(std::ifstream(std::string(SBD_SOURCE_DIR) + "/runbooks/" + file).good());
  }
}

TEST_CASE("status page: problems come first, worst first, and healthy clusters are folded",
          "[status_page]") {
  const auto now = WallClock::now();
  const std::string html = StatusHtml({Cluster("alpha", Verdict::kHealthy, {"a1"}, now),
                                       Cluster("bravo", Verdict::kUnknown, {"b1"}, now),
                                       Cluster("charlie", Verdict::kSplitBrain, {"c1", "c2"}, now),
                                       Cluster("delta", Verdict::kHealthy, {"d1"}, now)},
                                      nullptr, now);
  const size_t alpha = ArticleOf(html, "alpha"), bravo = ArticleOf(html, "bravo"),
               charlie = ArticleOf(html, "charlie"), delta = ArticleOf(html, "delta");
  REQUIRE(alpha != std::string::npos);
  REQUIRE(bravo != std::string::npos);
  REQUIRE(charlie != std::string::npos);
  REQUIRE(delta != std::string::npos);
  CHECK(charlie < bravo);
  CHECK(bravo < alpha);
  CHECK(alpha < delta);  // the config's order among equals
  CHECK_FALSE(InsideDetails(html, charlie));
  CHECK_FALSE(InsideDetails(html, bravo));
  CHECK(InsideDetails(html, alpha));
  CHECK(InsideDetails(html, delta));
  CHECK(html.find("<title>2 problems - splitbrain-detector</title>") != std::string::npos);
}

TEST_CASE("status page: hostile names, summaries, reasons and authors never become markup",
          "[status_page]") {
  const auto now = WallClock::now();
  ClusterSnapshot c = Cluster(kHostile, Verdict::kSplitBrain, {kHostile, "b&b"}, now);
  c.assessment.summary = std::string("</style>") + kHostile;
  c.history.members["b&b"].last->result = ProbeFailure{ProbeFailureReason::kProtocol, kHostile};
  c.assessment.suppressions.push_back(
      {"provisioning", "provisioning", kHostile, "decl-1", "split_brain", {kHostile}, now});
  c.spec.kind = "patroni";
  c.spec.scope = kHostile;
  c.lock = {"patroni", true, kHostile};
  LockRecord dcs;
  dcs.holder = kHostile;
  dcs.endpoint = "http://127.0.0.1:2379";
  c.last_good_dcs = dcs;
  c.last_dcs_success = now;
  DeclarationsView view;
  Declaration d;
  d.id = "decl-1";
  d.cluster = kHostile;
  d.reason = std::string("bad \xff\xfe bytes ") + kHostile;
  d.author = kHostile;
  d.source = "api";
  d.expires = now + std::chrono::hours(1);
  view.all.push_back(d);
  const std::string html = StatusHtml({c}, &view, now);
  INFO(html);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<img") == std::string::npos);
  const std::string escaped =
      "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;&quot;&lt;img src=x "
      "onerror=alert(1)&gt;";
  // As the cluster name, member name, lock holder, scope, error, suppression, declaration.
  CHECK(Count(html, escaped) >= 8);
  CHECK(html.find("held by <b>" + escaped + "</b>") != std::string::npos);
  CHECK(html.find("b&amp;b") != std::string::npos);
  CHECK(html.find("&lt;/style&gt;") != std::string::npos);
  CHECK(html.find("bad \xEF\xBF\xBD\xEF\xBF\xBD bytes") != std::string::npos);
  // Only the elements the page is built from: no hostile string opened one.
  std::set<std::string> tags;
  const std::regex tag("<([a-zA-Z][a-zA-Z0-9]*)");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), tag); it != std::sregex_iterator();
       ++it) {
    tags.insert((*it)[1]);
  }
  const std::set<std::string> allowed = {
      "html",    "head",    "meta",  "title",   "style", "body", "header", "h1",
      "h2",      "h3",      "p",     "span",    "code",  "nav",  "a",      "main",
      "section", "article", "table", "thead",   "tbody", "tr",   "th",     "td",
      "b",       "svg",     "rect",  "text",    "line",  "ul",   "li",     "details",
      "summary", "time",    "div",   "caption", "desc",  "defs", "pattern"};
  for (const auto& t : tags) CHECK(allowed.count(t) == 1);
  CheckWellFormed(html);
}

TEST_CASE("status page: no password, inline or from a file, is ever shown", "[status_page]") {
  const auto now = WallClock::now();
  const std::string html =
      StatusHtml({Cluster("pw", Verdict::kSplitBrain, {"m1", "m2"}, now)}, nullptr, now);
  CHECK(html.find(kInlinePassword) == std::string::npos);
  CHECK(html.find("password") == std::string::npos);
  CHECK(html.find("user=splitbrain") == std::string::npos);  // the DSN is not shown at all
}

TEST_CASE("status page: a lock store's holder, lease left and the members' Patroni roles",
          "[status_page]") {
  const auto now = WallClock::now();
  ClusterSnapshot c = Cluster("patroni-main", Verdict::kHealthy, {"node1", "node2"}, now);
  c.spec.kind = "patroni";
  c.spec.scope = "main";
  c.lock = {"patroni", true, "/service/main/leader"};  // what the scheduler describes
  c.assessment.lock_readable = true;
  c.assessment.lock_holder = "node1";
  LockRecord dcs;
  dcs.holder = "node1";
  dcs.lease_ttl_remaining = 20;
  dcs.lease_granted_ttl = 30;
  dcs.endpoint = "http://127.0.0.1:2379";
  c.last_good_dcs = dcs;
  c.last_dcs_success = now - seconds(5);
  PatroniReading p;
  p.role = "primary";
  p.state = "running";
  c.history.members["node1"].last_patroni = p;
  const std::string html = StatusHtml({c}, nullptr, now);
  INFO(html);
  CHECK(html.find("held by <b>node1</b>, lease left about <b>15 s</b> of 30 s") !=
        std::string::npos);
  CHECK(html.find("<b>leader key</b>") != std::string::npos);
  CHECK(html.find("primary <span class=\"muted\">(Patroni, running)</span>") != std::string::npos);

  // The lock store unreadable this round: said so, with the last good read kept.
  c.assessment.lock_readable = false;
  c.assessment.lock_error = "etcd: connection refused";
  const std::string unreadable = StatusHtml({c}, nullptr, now);
  CHECK(unreadable.find("unreadable</span> etcd: connection refused") != std::string::npos);
}

TEST_CASE("status page: every part of it passes tidy's HTML5 and accessibility checks",
          "[status_page]") {
  const auto now = WallClock::now();
  // Hostile names in a split brain with a lock, a failed probe, a suppression and declarations
  // in force and expired; a healthy cluster; an unknown one with an unreachable member.
  ClusterSnapshot hostile = Cluster(kHostile, Verdict::kSplitBrain, {kHostile, "b&b"}, now);
  hostile.history.members["b&b"].last->result =
      ProbeFailure{ProbeFailureReason::kProtocol, kHostile};
  hostile.assessment.suppressions.push_back(
      {"provisioning", "provisioning", kHostile, "decl-1", "split_brain", {kHostile}, now});
  hostile.spec.kind = "patroni";
  hostile.spec.scope = kHostile;
  hostile.lock = {"patroni", true, kHostile};
  LockRecord dcs;
  dcs.holder = kHostile;
  dcs.endpoint = "http://127.0.0.1:2379";
  hostile.last_good_dcs = dcs;
  hostile.last_dcs_success = now;
  ClusterSnapshot unknown = Cluster("inventory", Verdict::kUnknown, {"pg-x", "pg-y"}, now);
  unknown.history.members["pg-y"].last->result =
      ProbeFailure{ProbeFailureReason::kTimeout, "timed out"};
  DeclarationsView view;
  Declaration d;
  d.id = "decl-1";
  d.cluster = kHostile;
  d.reason = std::string("bad \xff\xfe bytes ") + kHostile;
  d.author = kHostile;
  d.source = "api";
  d.expires = now + std::chrono::hours(1);
  Declaration old = d;
  old.id = "decl-0";
  old.expires = now - std::chrono::hours(1);
  view.all = {d, old};
  const auto at = [&](int ago) { return now - seconds(ago); };
  StatusPageOptions options;
  options.incidents = [&](const std::set<std::string>&) {
    return std::vector<IncidentEvent>{
        {at(90),
         kHostile,
         "cluster_added",
         {{"verdict", "healthy"}, {"members", {{kHostile, "writable"}, {"b&b", "standby"}}}}},
        {at(60),
         kHostile,
         "member_state_changed",
         {{"member", "b&b"}, {"from", "standby"}, {"to", "writable"}}},
        {at(59), kHostile, "verdict_changed", {{"from", "healthy"}, {"to", "split_brain"}}},
        {at(30),
         kHostile,
         "member_state_changed",
         {{"member", "b&b"}, {"from", "writable"}, {"to", "unreadable"}}},
        {at(40), "inventory", "verdict_changed", {{"from", "healthy"}, {"to", "unknown"}}},
        {at(41),
         "inventory",
         "member_state_changed",
         {{"member", "pg-y"}, {"from", "standby"}, {"to", "unreadable"}}}};
  };
  const std::vector<ClusterSnapshot> clusters = {
      hostile, Cluster("billing", Verdict::kHealthy, {"pg-c"}, now), unknown};
  testing::TempDir dir("sbd-status-tidy");
  for (const bool refreshing : {true, false}) {
    options.auto_refresh = refreshing;
    const std::string html = StatusHtml(clusters, &view, now, options);
    REQUIRE(Count(html, "Incident timeline") == 2);
    REQUIRE(html.find("url(#ic-") != std::string::npos);  // an unreachable stretch, hatched
    REQUIRE(html.find("<details><summary>1 expired</summary>") != std::string::npos);
    // A long member name has a short form for the row header (tidy asks for one).
    CHECK(html.find("<th scope=\"row\" abbr=\"&lt;script&gt;aler\u2026\">&lt;script&gt;") !=
          std::string::npos);
    const std::string file = testing::WriteFile(dir.path(), "page.html", html);
    const testing::TidyReport tidy = testing::TidyHtml(file, refreshing);
    INFO(tidy.output);
    CHECK(tidy.exit_code == 0);
    CHECK(tidy.findings.empty());
    CHECK(tidy.output.find("(STYLESHEETS_REQUIRE_TESTING_STYLE_ELEMENT)") != std::string::npos);
    CheckWellFormed(html);
  }
}

TEST_CASE("status page: Shortened cuts on a character boundary and marks the cut",
          "[status_page]") {
  CHECK(Shortened("pg-a", 4) == "pg-a");
  CHECK(Shortened("pg-a1", 4) == "pg-a\u2026");
  CHECK(Shortened("ab\u20ACcd", 4) == "ab\u2026");  // never half of the euro sign's 3 bytes
  CHECK(Shortened("ab\u20ACcd", 5) == "ab\u20AC\u2026");
}

TEST_CASE("status page: declarations in force are listed, expired ones folded", "[status_page]") {
  const auto now = WallClock::now();
  DeclarationsView view;
  Declaration active;
  active.id = "api-1";
  active.cluster = "orders";
  active.reason = "new replica being built";
  active.author = "carol";
  active.source = "api";
  active.expires = now + std::chrono::hours(2);
  Declaration expired = active;
  expired.id = "api-0";
  expired.expires = now - std::chrono::hours(2);
  view.all = {active, expired};
  const std::string html =
      StatusHtml({Cluster("orders", Verdict::kHealthy, {"o1"}, now)}, &view, now);
  const size_t section = html.find("<section id=\"declarations\">");
  REQUIRE(section != std::string::npos);
  CHECK(html.find("api-1", section) < html.find("expired</summary>", section));
  CHECK(html.find("api-0", section) > html.find("expired</summary>", section));
  // Shown with its cluster too.
  CHECK(html.find("declared</span> provisioning by carol (api-1): new replica being built") <
        section);
}

TEST_CASE("status page: a status that is not JSON, or lacks parts, still gives a page",
          "[status_page]") {
  const auto now = WallClock::now();
  for (const std::string text :
       {"not json", "{}", "[]", R"({"clusters": 5})",
        R"({"clusters": [{"verdict": 5, "members": "x", "name": ["<b>"]}, 7, null]})",
        R"({"clusters": [{"name": "x", "verdict": "split_brain", "members": [{"name": {}}],
            "lock": {"readable": "yes", "last_success": "yesterday"}, "verdict_since": 3}]})"}) {
    INFO(text);
    std::string html;
    REQUIRE_NOTHROW(html = StatusHtmlFromJsonText(text, now));
    CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(html.find("</html>") != std::string::npos);
    CHECK(html.find("<b>\"") == std::string::npos);
  }
  CHECK(StatusHtmlFromJsonText("not json", now).find("could not be read") != std::string::npos);
}

TEST_CASE("status page: HtmlEscape escapes markup and replaces invalid UTF-8 and controls",
          "[status_page]") {
  CHECK(HtmlEscape("<a href='x'>&\"</a>") == "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
  CHECK(HtmlEscape("caf\xC3\xA9 \xE2\x9C\x94") == "caf\xC3\xA9 \xE2\x9C\x94");
  CHECK(HtmlEscape("a\xC3") == "a\xEF\xBF\xBD");                // truncated sequence
  CHECK(HtmlEscape("\xC0\xBC") == "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '<'
  CHECK(HtmlEscape("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  CHECK(HtmlEscape("a\xC2\x85"
                   "b") ==
        "a\xEF\xBF\xBD\xEF\xBF\xBD"
        "b");  // C1 control (NEL)
  CHECK(HtmlEscape("a\xC2\xA0"
                   "b") ==
        "a\xC2\xA0"
        "b");  // U+00A0 is not a control
  CHECK(HtmlEscape("\xF4\x90\x80\x80") ==
        "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // beyond U+10FFFF
  CHECK(HtmlEscape(std::string("a\0b\x1b\x7f\tc\n", 8)) ==
        "a\xEF\xBF\xBD"
        "b\xEF\xBF\xBD\xEF\xBF\xBD\tc\n");
}

TEST_CASE("status page: served at / with a strict CSP, behind the same basic auth as /status",
          "[status_page]") {
  const auto now = WallClock::now();
  const std::vector<ClusterSnapshot> clusters = {
      Cluster("served", Verdict::kSplitBrain, {"s1", "s2"}, now)};
  Exporter::Sources sources;
  sources.metrics =
      std::make_shared<DetectorCollector>([] { return std::vector<ClusterSnapshot>{}; }, nullptr);
  sources.status = [&](bool) { return StatusJson(clusters).dump(); };
  sources.ready = [] { return true; };
  WebConfig web;
  web.basic_auth_users = {{"viewer", Bcrypt("look")}};
  Exporter exporter(sources, web);
  std::string error;
  REQUIRE(exporter.Bind("127.0.0.1:0", &error));
  exporter.Start();
  httplib::Client client("127.0.0.1", exporter.port());
  for (const char* path : {"/", "/status"}) {
    auto anonymous = client.Get(path);
    REQUIRE(anonymous);
    CHECK(anonymous->status == 401);
  }
  client.set_basic_auth("viewer", "look");
  auto page = client.Get("/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->get_header_value("Content-Type") == "text/html; charset=utf-8");
  CHECK(page->get_header_value("Content-Security-Policy") ==
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'");
  CHECK(page->get_header_value("X-Content-Type-Options") == "nosniff");
  CHECK(page->body.find("<span class=\"name\">served</span>") != std::string::npos);
  CHECK(page->body.find(">s2</th>") != std::string::npos);
  CHECK(page->body.find("<code class=\"verdict\">split_brain</code>") != std::string::npos);
  CHECK(page->body.find("<meta http-equiv=\"refresh\" content=\"5\">") != std::string::npos);
  CHECK(page->body.find("<a href=\"?refresh=off\">stop refreshing</a>") != std::string::npos);
  // Whoever cannot follow a page that reloads under them reads it still.
  auto still = client.Get("/?refresh=off");
  REQUIRE(still);
  CHECK(still->status == 200);
  CHECK(still->body.find("http-equiv=\"refresh\"") == std::string::npos);
  CHECK(still->body.find("<span class=\"name\">served</span>") != std::string::npos);
  exporter.Stop();
}

TEST_CASE("status page: served at / with the incident log's chart when a source is set",
          "[status_page]") {
  const auto now = WallClock::now();
  const std::vector<ClusterSnapshot> clusters = {
      Cluster("served", Verdict::kSplitBrain, {"s1", "s2"}, now)};
  Exporter::Sources sources;
  sources.metrics =
      std::make_shared<DetectorCollector>([] { return std::vector<ClusterSnapshot>{}; }, nullptr);
  sources.status = [&](bool) { return StatusJson(clusters).dump(); };
  sources.ready = [] { return true; };
  std::set<std::string> asked;
  sources.incident_events = [&](const std::set<std::string>& names) {
    asked = names;
    return std::vector<IncidentEvent>{
        {now - std::chrono::seconds(20),
         "served",
         "verdict_changed",
         {{"from", "healthy"}, {"to", "split_brain"}}},
        {now - std::chrono::seconds(10),
         "served",
         "member_state_changed",
         {{"member", "s2"}, {"from", "standby"}, {"to", "writable"}}}};
  };
  Exporter exporter(sources, WebConfig{});
  std::string error;
  REQUIRE(exporter.Bind("127.0.0.1:0", &error));
  exporter.Start();
  httplib::Client client("127.0.0.1", exporter.port());
  auto page = client.Get("/");
  REQUIRE(page);
  CHECK(asked == std::set<std::string>{"served"});
  CHECK(page->body.find("<title>Who was writable when in served</title>") != std::string::npos);
  // Before the log's first event nothing is known; then s2 was a standby, then writable.
  const size_t s2 = page->body.find("<li>s2: no record ");
  REQUIRE(s2 != std::string::npos);
  const std::string item = page->body.substr(s2, page->body.find("</li>", s2) - s2);
  CHECK(item.find("; standby ") != std::string::npos);
  CHECK(item.find("; writable ") != std::string::npos);
  exporter.Stop();
}

}  // namespace sbd

namespace sbd {
namespace {

TEST_CASE("status: invalid UTF-8 from the network renders as U+FFFD, never an error",
          "[status_page]") {
  const auto now = WallClock::now();
  ClusterSnapshot c = Cluster("orders", Verdict::kUnknown, {"pg-a", "pg-b"}, now);
  // A server's error text in another encoding, and a member name read from the DCS.
  Observation failed = *c.history.members["pg-b"].last;
  failed.result = ProbeFailure{ProbeFailureReason::kQuery, "FATAL: base \xe9tendue \xff"};
  c.history.members["pg-b"].last = failed;
  c.assessment.summary = "pg-b is unreadable: \xff\xfe";
  const nlohmann::json status = StatusJson({c}, nullptr);
  // nlohmann's default dump throws on these strings: that is what a 500 on /status was.
  CHECK_THROWS(status.dump(2));
  std::string text;
  REQUIRE_NOTHROW(text = JsonText(status, 2));
  CHECK(text.find("\xef\xbf\xbd") != std::string::npos);
  CHECK(nlohmann::json::parse(text)["clusters"][0]["name"] == "orders");
  REQUIRE_NOTHROW(StatusText({c}, nullptr));
}

TEST_CASE(
    "status: an endpoint's userinfo and a metrics_url's query never show in status, page, "
    "metrics or alerts",
    "[status_page]") {
  const auto now = WallClock::now();
  ClusterSnapshot c = Cluster("leaky", Verdict::kSplitBrain, {"node1", "node2"}, now);
  c.spec.kind = "patroni";
  c.spec.scope = "main";
  c.lock = {"patroni", true, "/service/main/leader"};
  c.assessment.lock_readable = true;
  c.assessment.lock_holder = "node1";
  c.assessment.zombies = {"node2"};
  c.split_brain_open = true;
  LockRecord dcs;
  dcs.holder = "node1";
  dcs.endpoint = "https://root:Etcd-S3cret@127.0.0.1:2379";
  c.last_good_dcs = dcs;
  c.last_dcs_success = now - seconds(1);
  // A claim member's address is its metrics_url, query string and all.
  c.spec.members[1].address = "http://scraper:Sc-Pass@127.0.0.1:9100/metrics?token=Claim-T0ken#x";
  const std::vector<ClusterSnapshot> clusters = {c};

  std::string alerts;
  for (const Alert& alert : AlertsFor(c, AlertingSpec{}, AlertLinks{})) {
    for (const auto& [name, value] : alert.labels) alerts += name + "=" + value + "\n";
    for (const auto& [name, value] : alert.annotations) alerts += name + "=" + value + "\n";
  }
  const std::string status = JsonText(StatusJson(clusters));
  const std::map<std::string, std::string> surfaces = {
      {"status", status},
      {"text status", StatusText(clusters)},
      {"status page", StatusHtml(clusters, nullptr, now)},
      {"metrics", RenderMetrics(DetectorCollector([&] { return clusters; }, nullptr))},
      {"alerts", alerts}};
  for (const auto& [surface, text] : surfaces) {
    INFO(surface << ":\n" << text);
    for (const char* secret : {"Etcd-S3cret", "root:", "Sc-Pass", "Claim-T0ken", "token="}) {
      CHECK(text.find(secret) == std::string::npos);
    }
  }
  // What is left is still said: where the lock was read, and each member's address.
  const nlohmann::json parsed = nlohmann::json::parse(status);
  CHECK(parsed["clusters"][0]["lock"]["endpoint"] == "https://127.0.0.1:2379");
  CHECK(parsed["clusters"][0]["members"][1]["address"] == "http://127.0.0.1:9100/metrics");
  CHECK(surfaces.at("status page").find("from https://127.0.0.1:2379") != std::string::npos);
  CHECK(surfaces.at("alerts").find("node2 (http://127.0.0.1:9100/metrics)") != std::string::npos);
  CHECK(surfaces.at("metrics").find("address=\"http://127.0.0.1:9100/metrics\"") !=
        std::string::npos);
}

TEST_CASE("RedactedUrl: userinfo, query and fragment go; scheme, host, port and path stay",
          "[status_page]") {
  CHECK(RedactedUrl("https://u:p@etcd:2379/x?token=t#f") == "https://etcd:2379/x");
  CHECK(RedactedUrl("http://u:p@ss@[::1]:2379") == "http://[::1]:2379");
  CHECK(RedactedUrl("http://etcd:2379?k=v") == "http://etcd:2379");
  CHECK(RedactedUrl("http://etcd:2379/path/with@sign") == "http://etcd:2379/path/with@sign");
  CHECK(RedactedUrl("10.0.0.5:5432") == "10.0.0.5:5432");
  CHECK(RedactedUrl("user@10.0.0.5:5432") == "10.0.0.5:5432");
  CHECK(RedactedUrl("") == "");
  // "://" in a query is no scheme: the query still goes.
  CHECK(RedactedUrl("h:1/x?next=http://u:p@y") == "h:1/x");
}

}  // namespace
}  // namespace sbd
