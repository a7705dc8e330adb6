// Declarations read from Alertmanager silences: the parser (every byte untrusted), the merge
// across Alertmanagers, the matcher evaluation, and the reader against an in-process server.
#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "detector/output/alerts.h"
#include "suppressors/alertmanager_silences.h"
#include "suppressors/declaration_store.h"
#include "suppressors/silence_fetch.h"
#include "suppressors/silence_matchers.h"
#include "suppressors/silence_reader.h"
#include "tests/support/hostile_http.h"

using nlohmann::json;
using sbd::AlertmanagerSilencesSpec;
using sbd::Millis;
using sbd::SilenceReadout;
using sbd::WallTime;

namespace {

const WallTime kNow = *sbd::ParseRfc3339("2026-11-30T12:00:00Z");
const Millis kMax = std::chrono::hours(24);
const std::string kAm = "http://am1:9093";

json Matcher(const std::string& name, const std::string& value, bool regex = false,
             bool equal = true) {
  return {{"name", name}, {"value", value}, {"isRegex", regex}, {"isEqual", equal}};
}

// Matchers as a vector, not a json: `json m = {one_matcher}` is an array of one under g++ but
// the matcher object itself under clang (a one-element braced list copies).
json Silence(const std::string& id, std::vector<json> matchers, const std::string& state = "active",
             const std::string& starts = "2026-11-30T11:00:00.000Z",
             const std::string& ends = "2026-11-30T15:00:00.000Z") {
  return {{"id", id},
          {"status", {{"state", state}}},
          {"updatedAt", starts},
          {"comment", "building the v17 cluster (CHG-1234)"},
          {"createdBy", "alice"},
          {"startsAt", starts},
          {"endsAt", ends},
          {"matchers", json(std::move(matchers))}};
}

json Declaring(const std::string& id, const std::string& kind = "rebuilding") {
  return Silence(id, {Matcher("splitbrain_declaration", kind), Matcher("cluster", "orders")});
}

AlertmanagerSilencesSpec PageSpec() {
  AlertmanagerSilencesSpec spec;
  spec.page_labels = {
      {{"alertname", "SplitBrain"}, {"severity", "critical"}, {"cluster", "orders"}}};
  return spec;
}

SilenceReadout Parse(const json& silences, const std::string& am = kAm) {
  auto parsed = sbd::ParseSilences(silences.dump(), am, kNow, kMax, PageSpec());
  REQUIRE(std::holds_alternative<SilenceReadout>(parsed));
  return std::get<SilenceReadout>(std::move(parsed));
}

std::string OnlyRejection(const json& silence) {
  const SilenceReadout r = Parse(json::array({silence}));
  CHECK(r.declarations.empty());
  REQUIRE(r.rejected.size() == 1);
  return r.rejected[0].message;
}

}  // namespace

TEST_CASE("silences: a declaration silence becomes a declaration", "[silences]") {
  json silence = Silence(
      "9f0c-41", {Matcher("splitbrain_declaration", "cutover"), Matcher("cluster", "orders"),
                  Matcher("scope", "v17"), Matcher("member", "pg2")});
  const SilenceReadout r = Parse(json::array({silence}));
  REQUIRE(r.declarations.size() == 1);
  const sbd::Declaration& d = r.declarations[0];
  CHECK(d.id == "am:9f0c-41");
  CHECK(d.kind == sbd::DeclarationKind::kCutover);
  CHECK(d.cluster == "orders");
  CHECK(d.scope == "v17");
  CHECK(d.member == "pg2");
  CHECK(d.author == "alice");
  CHECK(d.reason == "building the v17 cluster (CHG-1234)");
  CHECK(d.source == "alertmanager");
  CHECK(d.origin == kAm);
  CHECK(sbd::FormatRfc3339(d.expires) == "2026-11-30T15:00:00Z");
  CHECK(r.rejected.empty());
  CHECK(r.page_silences.empty());
}

TEST_CASE("silences: pending ones wait, expired ones are remembered as ended", "[silences]") {
  json pending = Declaring("p1");
  pending["status"]["state"] = "pending";
  json expired = Declaring("e1");
  expired["status"]["state"] = "expired";
  expired["endsAt"] = "2026-11-30T11:30:00Z";
  const SilenceReadout r = Parse(json::array({pending, expired}));
  CHECK(r.declarations.empty());
  CHECK(r.rejected.empty());
  REQUIRE(r.ended.count("e1") == 1);
  CHECK(sbd::FormatRfc3339(r.ended.at("e1")) == "2026-11-30T11:30:00Z");
}

TEST_CASE("silences: a declaration silence that cannot be one is rejected with the reason",
          "[silences]") {
  CHECK(OnlyRejection(Declaring("a", "maintenance")) ==
        "unknown kind splitbrain_declaration=\"maintenance\": expected provisioning, rebuilding, "
        "cutover or decommissioning");
  CHECK(OnlyRejection(Silence("b", {Matcher("splitbrain_declaration", "rebuilding")})) ==
        "no cluster matcher: add cluster=<the detector's cluster name>");
  CHECK(OnlyRejection(Silence(
            "c", {Matcher("splitbrain_declaration", "rebuilding"), Matcher("cluster", "orders")},
            "active", "2026-11-30T11:00:00Z", "2026-12-02T11:00:00Z")) ==
        "lasts from 2026-11-30T11:00:00Z to 2026-12-02T11:00:00Z, longer than the maximum 1d "
        "(suppressions.max_duration); expire it and add one that ends sooner");
  CHECK(OnlyRejection(Silence("d", {Matcher("splitbrain_declaration", "rebuilding"),
                                    Matcher("cluster", "ord.*", true)})) ==
        "matcher cluster must be an equality matcher (cluster=value)");
  CHECK(OnlyRejection(Silence("e", {Matcher("splitbrain_declaration", "rebuilding"),
                                    Matcher("cluster", "orders"), Matcher("alertname", "X")})) ==
        "unexpected matcher alertname: a declaration has only splitbrain_declaration, cluster, "
        "scope and member");
  CHECK(OnlyRejection(Silence("f", {Matcher("splitbrain_declaration", "rebuilding"),
                                    Matcher("cluster", "orders"), Matcher("cluster", "b")})) ==
        "matcher cluster given twice");
  json no_comment = Declaring("g");
  no_comment["comment"] = "";
  CHECK(OnlyRejection(no_comment) == "comment: empty");
  json two_lines = Declaring("h");
  two_lines["comment"] = "one\nlevel=error msg=forged";
  CHECK(OnlyRejection(two_lines) == "comment: not one line of text (control character)");
}

TEST_CASE("silences: wrongly typed fields are errors, never exceptions", "[silences]") {
  const std::vector<std::pair<std::string, json>> broken = {
      {"matchers", json::object()},
      {"matchers", json::array({{{"name", "splitbrain_declaration"}, {"value", 7}}})},
      {"startsAt", 12},
      {"endsAt", "tomorrow"},
      {"status", "active"},
  };
  for (const auto& [field, value] : broken) {
    json silence = Declaring("x1");
    silence[field] = value;
    INFO(field << " = " << value.dump());
    const SilenceReadout r = Parse(json::array({silence}));
    CHECK(r.declarations.empty());
    // A silence whose matchers cannot be read cannot be told a declaration: nothing to report.
    CHECK(r.rejected.size() == (field == "matchers" && value.is_object() ? 0u : 1u));
  }
  json bad_id = Declaring("x2");
  bad_id["id"] = 42;
  CHECK(OnlyRejection(bad_id) == "id: expected a string of letters, digits and '-'");
  json bad_author = Declaring("x3");
  bad_author["createdBy"] = json::array();
  CHECK(OnlyRejection(bad_author) == "createdBy: empty");
  // Not objects at all.
  const SilenceReadout r = Parse(json::array({1, "s", nullptr, json::array()}));
  CHECK(r.rejected.size() == 4);
  CHECK(r.declarations.empty());
}

TEST_CASE("silences: a hostile answer is an error or a rejection, nothing crashes", "[silences]") {
  for (const std::string body : {"", "{", "{\"id\":1}", "null", "\xff\xfe", "[1,2"}) {
    INFO(body);
    CHECK(std::holds_alternative<std::string>(sbd::ParseSilences(body, kAm, kNow, kMax, {})));
  }
  std::string deep(100000, '[');
  CHECK(std::holds_alternative<std::string>(sbd::ParseSilences(deep, kAm, kNow, kMax, {})));
  // Balanced, so it is JSON: refused on its depth before anything walks it.
  const auto nested = sbd::ParseSilences(deep + std::string(100000, ']'), kAm, kNow, kMax, {});
  REQUIRE(std::holds_alternative<std::string>(nested));
  CHECK(std::get<std::string>(nested) == "the answer is nested deeper than 64 levels");
  json silence = Declaring("y1");
  silence["comment"] = std::string(600, 'a');
  CHECK(OnlyRejection(silence) == "comment: longer than 500 bytes");
  const std::string invalid_utf8 = "[{\"id\":\"y2\",\"comment\":\"caf\xc3\"}]";
  CHECK(std::holds_alternative<std::string>(sbd::ParseSilences(invalid_utf8, kAm, kNow, kMax, {})));
  // Names are escaped where they are shown: one log line, whatever the silence says.
  silence = Silence(
      "y3", {Matcher("splitbrain_declaration", "x\nlevel=error"), Matcher("cluster", "orders")});
  CHECK(OnlyRejection(silence).find('\n') == std::string::npos);
}

TEST_CASE("silences: merged by id, ending at the earliest end any Alertmanager gives",
          "[silences]") {
  json later = Declaring("m1");
  later["endsAt"] = "2026-11-30T16:00:00Z";
  const SilenceReadout one = Parse(json::array({Declaring("m1"), Declaring("only-one")}));
  const SilenceReadout two = Parse(json::array({later}), "http://am2:9093");
  auto merged = sbd::MergeSilences({one, two}, kNow);
  REQUIRE(merged.declarations.size() == 2);
  CHECK(merged.declarations[0].id == "am:m1");
  CHECK(sbd::FormatRfc3339(merged.declarations[0].expires) == "2026-11-30T15:00:00Z");
  CHECK(merged.declarations[0].origin == "http://am1:9093, http://am2:9093");
  // Expired on one (amtool silence expire), still active on the other: it has ended.
  json expired = Declaring("m1");
  expired["status"]["state"] = "expired";
  expired["endsAt"] = "2026-11-30T11:59:00Z";
  const SilenceReadout three = Parse(json::array({expired}), "http://am2:9093");
  merged = sbd::MergeSilences({one, three}, kNow);
  REQUIRE(merged.declarations.size() == 1);
  CHECK(merged.declarations[0].id == "am:only-one");
}

TEST_CASE("silences: a silence that hides the SplitBrain page is flagged", "[silences]") {
  auto flagged = [](std::vector<json> matchers) {
    return Parse(json::array({Silence("s1", std::move(matchers))})).page_silences.size() == 1;
  };
  CHECK(flagged({Matcher("alertname", "SplitBrain.*", true)}));
  CHECK(flagged({Matcher("alertname", "SplitBrain")}));
  CHECK(flagged({Matcher("severity", "critical")}));
  CHECK(flagged({Matcher("severity", "warning|critical", true), Matcher("cluster", "orders")}));
  CHECK(flagged({Matcher("alertname", "Watchdog", false, false)}));
  CHECK_FALSE(flagged({Matcher("alertname", "Watchdog")}));
  CHECK_FALSE(flagged({Matcher("alertname", "(Postgres|Etcd).*", true)}));
  CHECK_FALSE(flagged({Matcher("alertname", "SplitBrain"), Matcher("cluster", "billing")}));
  CHECK_FALSE(flagged({Matcher("severity", "critical"), Matcher("instance", "db1:9187")}));
  const auto r = Parse(json::array({Silence("s2", {Matcher("alertname", "SplitBrain.*", true)})}));
  REQUIRE(r.page_silences.size() == 1);
  CHECK(r.page_silences[0].ToString() ==
        "silence s2 (http://am1:9093): silences the SplitBrain page of cluster orders: "
        "{alertname=~\"SplitBrain.*\"} by alice until 2026-11-30T15:00:00Z");
}

TEST_CASE(
    "silences: any matcher on the pages' full label set counts, lock_kind and a "
    "declaration's regex included",
    "[silences]") {
  sbd::ClusterSpec orders;
  orders.name = "orders";
  orders.kind = "patroni";
  sbd::AlertingSpec alerting;
  alerting.external_labels = {{"env", "prod"}};
  AlertmanagerSilencesSpec spec;
  spec.page_labels = sbd::PageLabelSets(orders, alerting);
  // The labels are the alerts' own: every page of a Patroni cluster carries lock_kind.
  REQUIRE(spec.page_labels.size() == 2);
  CHECK(spec.page_labels[0].at("lock_kind") == "patroni");
  CHECK(spec.page_labels[0].at("env") == "prod");
  auto page_silences = [&](std::vector<json> matchers) {
    auto parsed = sbd::ParseSilences(json::array({Silence("s1", std::move(matchers))}).dump(), kAm,
                                     kNow, kMax, spec);
    REQUIRE(std::holds_alternative<SilenceReadout>(parsed));
    return std::get<SilenceReadout>(std::move(parsed));
  };
  // `amtool silence add lock_kind=patroni`: every Patroni page in the fleet.
  const SilenceReadout by_kind = page_silences({Matcher("lock_kind", "patroni")});
  REQUIRE(by_kind.page_silences.size() == 1);
  CHECK(by_kind.page_silences[0].message.find("silences the SplitBrain page of cluster orders: "
                                              "{lock_kind=\"patroni\"}") == 0);
  CHECK(page_silences({Matcher("lock_kind", "pat.*", true), Matcher("env", "prod")})
            .page_silences.size() == 1);
  CHECK(page_silences({Matcher("lock_kind", "etcd", false, false)}).page_silences.size() == 1);
  CHECK(page_silences({Matcher("lock_kind", "redis")}).page_silences.empty());
  CHECK(page_silences({Matcher("lock_kind", "patroni"), Matcher("env", "staging")})
            .page_silences.empty());
  // A matcher named splitbrain_declaration no longer exempts a silence from the check: this
  // one mutes every page, and is also refused as a declaration.
  const SilenceReadout regex = page_silences(
      {Matcher("alertname", "SplitBrain"), Matcher("splitbrain_declaration", ".*", true)});
  REQUIRE(regex.page_silences.size() == 1);
  CHECK(regex.page_silences[0].silence_id == "s1");
  REQUIRE(regex.rejected.size() == 1);
  CHECK(regex.declarations.empty());
  // FencingTokenRegressed is a page too.
  const SilenceReadout fence = page_silences({Matcher("alertname", "FencingTokenRegressed")});
  REQUIRE(fence.page_silences.size() == 1);
  CHECK(fence.page_silences[0].message.find("silences the FencingTokenRegressed page") == 0);
  // A well-formed declaration matches no page: no alert carries splitbrain_declaration.
  const SilenceReadout declared = page_silences(
      {Matcher("splitbrain_declaration", "rebuilding"), Matcher("cluster", "orders")});
  CHECK(declared.page_silences.empty());
  CHECK(declared.declarations.size() == 1);
  // Nor does one that needs splitbrain_declaration to be set.
  CHECK(page_silences(
            {Matcher("splitbrain_declaration", "", false, false), Matcher("cluster", "orders")})
            .page_silences.empty());
}

TEST_CASE("silence matchers: RE2, anchored, linear; a pattern it cannot compile may match",
          "[silences]") {
  CHECK(sbd::RegexMayMatch("Split.*", "SplitBrain"));
  CHECK(sbd::RegexMayMatch("(?:Foo|Split)Brain", "SplitBrain"));
  CHECK(sbd::RegexMayMatch("[A-Z]plit[^x]rain", "SplitBrain"));
  CHECK(sbd::RegexMayMatch("\\w+", "SplitBrain"));
  CHECK_FALSE(sbd::RegexMayMatch("Split", "SplitBrain"));  // anchored
  CHECK_FALSE(sbd::RegexMayMatch("a|b", "ab"));
  CHECK_FALSE(sbd::RegexMayMatch(".+", ""));
  CHECK(sbd::RegexMayMatch("(?i)splitbrain", "SplitBrain"));
  CHECK_FALSE(sbd::RegexMayMatch("a{2}", "x"));
  CHECK(sbd::RegexMayMatch("Split(Brain){1,3}", "SplitBrain"));
  CHECK(sbd::RegexMayMatch("(unbalanced", "x"));
  // What a backtracking engine takes exponential time (or stack) for.
  const auto start = std::chrono::steady_clock::now();
  std::string nested;
  for (int i = 0; i < 60; ++i) nested = "(" + nested + "a*)*";
  CHECK_FALSE(sbd::RegexMayMatch(nested + "b", std::string(200, 'a')));
  CHECK(sbd::RegexMayMatch(std::string(1000, '('), "x"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("silences: the reader keeps an unreachable Alertmanager's declarations until expiry",
          "[silences]") {
  httplib::Server server;
  std::string authorization;
  json answer = json::array({Declaring("k1")});
  server.Get("/prefix/api/v2/silences", [&](const httplib::Request& req, httplib::Response& res) {
    authorization = req.get_header_value("Authorization");
    res.set_content(answer.dump(), "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { server.listen_after_bind(); });
  AlertmanagerSilencesSpec spec = PageSpec();
  spec.enabled = true;
  spec.timeout = Millis(1000);
  spec.alertmanager_urls = {"http://user:s3cret@127.0.0.1:" + std::to_string(port) + "/prefix"};
  sbd::AlertmanagerSilenceReader reader;
  auto first = reader.Read(spec, kMax, kNow);
  CHECK(authorization == "Basic dXNlcjpzM2NyZXQ=");
  REQUIRE(first.declarations.size() == 1);
  REQUIRE(first.sources.size() == 1);
  CHECK(first.sources[0].up);
  CHECK(first.sources[0].alertmanager == "http://127.0.0.1:" + std::to_string(port) + "/prefix");
  server.stop();
  thread.join();
  auto kept = reader.Read(spec, kMax, kNow + std::chrono::hours(1));
  REQUIRE(kept.declarations.size() == 1);
  CHECK(sbd::FormatRfc3339(kept.declarations[0].expires) == "2026-11-30T15:00:00Z");
  CHECK_FALSE(kept.sources[0].up);
  CHECK_FALSE(kept.sources[0].error.empty());
  CHECK(kept.sources[0].error.find("s3cret") == std::string::npos);
  // Past its own expiry it is gone, the Alertmanager still unreadable.
  CHECK(reader.Read(spec, kMax, kNow + std::chrono::hours(4)).declarations.empty());
}

TEST_CASE("silences: an answer larger than the limit or a wrong status is a failed read",
          "[silences]") {
  httplib::Server server;
  server.Get("/api/v2/silences", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(4096, ' '), "application/json");
  });
  server.Get("/broken/api/v2/silences",
             [&](const httplib::Request&, httplib::Response& res) { res.status = 500; });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { server.listen_after_bind(); });
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  auto big = sbd::FetchSilences(base, Millis(1000), 1024);
  REQUIRE(big.index() == 1);
  CHECK(std::get<1>(big) == "GET /api/v2/silences: answer larger than 1024 bytes");
  auto broken = sbd::FetchSilences(base + "/broken", Millis(1000), 1024);
  REQUIRE(broken.index() == 1);
  CHECK(std::get<1>(broken) == "GET /broken/api/v2/silences: HTTP 500");
  server.stop();
  thread.join();
}

TEST_CASE(
    "silences: trickling, endless-header and silent Alertmanagers fail at the whole deadline "
    "with the bound, beside a healthy one, on no thread of their own",
    "[silences]") {
  httplib::Server server;
  const json answer = json::array({Declaring("s1")});
  server.Get("/api/v2/silences", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(answer.dump(), "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { server.listen_after_bind(); });
  sbd::testing::HostileHttp trickle(sbd::testing::Hostility::kTrickleHeader, 10, "",
                                    std::chrono::milliseconds(100));
  sbd::testing::HostileHttp endless(sbd::testing::Hostility::kEndlessHeader);
  sbd::testing::HostileHttp silent(sbd::testing::Hostility::kSilent);
  AlertmanagerSilencesSpec spec;
  spec.enabled = true;
  spec.timeout = Millis(1500);
  spec.alertmanager_urls = {"http://127.0.0.1:" + std::to_string(port)};
  const auto base = [](const sbd::testing::HostileHttp& h, size_t i) {
    return h.url(i).substr(0, h.url(i).find("/metrics"));
  };
  for (size_t i = 0; i < 10; ++i) spec.alertmanager_urls.push_back(base(trickle, i));
  spec.alertmanager_urls.push_back(base(endless, 0));
  spec.alertmanager_urls.push_back(base(silent, 0));
  const auto threads = [] {
    size_t count = 0;
    for ([[maybe_unused]] const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
      ++count;
    }
    return count;
  };
  sbd::AlertmanagerSilenceReader reader;
  reader.Read(spec, kMax, kNow);  // once first, so that the event loop is running
  const size_t before = threads();
  const auto started = std::chrono::steady_clock::now();
  // Read from one thread of the test's own, counting this process's threads meanwhile.
  auto read = std::async(std::launch::async, [&] { return reader.Read(spec, kMax, kNow); });
  size_t most = 0;
  while (read.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    most = std::max(most, threads());
  }
  const sbd::SilenceDeclarations out = read.get();
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK(most <= before + 1);  // the test's own reading thread, nothing per Alertmanager
  CHECK(took < std::chrono::milliseconds(1500 + 1000));
  REQUIRE(out.sources.size() == 13);
  CHECK(out.sources[0].up);
  REQUIRE(out.declarations.size() == 1);
  for (size_t i = 1; i < 13; ++i) {
    INFO(out.sources[i].alertmanager << ": " << out.sources[i].error);
    CHECK_FALSE(out.sources[i].up);
  }
  // The deadline is the whole request's: 1500 ms, or 1499 when the loop starts it a moment later.
  const std::string outlasted = "GET /api/v2/silences: the answer outlasted the deadline of ";
  CHECK(out.sources[1].error.find(outlasted) == 0);
  CHECK(out.sources[11].error.find("GET /api/v2/silences: a header line longer than") == 0);
  CHECK(out.sources[12].error.find(outlasted) == 0);
  server.stop();
  thread.join();
}

TEST_CASE("declaration store: silences are merged with the other sources and not removable",
          "[silences]") {
  httplib::Server server;
  const json answer = json::array({Silence(
      "st1", {Matcher("splitbrain_declaration", "provisioning"), Matcher("cluster", "orders")},
      "active", sbd::FormatRfc3339(std::chrono::system_clock::now() - std::chrono::minutes(1)),
      sbd::FormatRfc3339(std::chrono::system_clock::now() + std::chrono::hours(1)))});
  server.Get("/api/v2/silences", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(answer.dump(), "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { server.listen_after_bind(); });
  sbd::SuppressionsSpec spec;
  spec.alertmanager_silences.enabled = true;
  spec.alertmanager_silences.alertmanager_urls = {"http://127.0.0.1:" + std::to_string(port)};
  // Read once when the store is made: the first round already sees it.
  sbd::DeclarationStore store(spec);
  const auto active = store.Active(std::chrono::system_clock::now());
  REQUIRE(active.size() == 1);
  CHECK(active[0].id == "am:st1");
  CHECK(active[0].source == "alertmanager");
  const sbd::DeclarationsView view = store.View();
  REQUIRE(view.silence_sources.size() == 1);
  CHECK(view.silence_sources[0].up);
  bool not_found = true;
  sbd::StoreRefusal refusal = sbd::StoreRefusal::kNone;
  CHECK(store.Remove("am:st1", &not_found, &refusal) ==
        "declared as a silence in Alertmanager (http://127.0.0.1:" + std::to_string(port) +
            "); expire it there: amtool silence expire st1");
  CHECK(refusal == sbd::StoreRefusal::kNotRemovable);
  CHECK(store.SilenceRefreshInterval() == Millis(5000));
  // A reload that turns the source off drops its declarations at the next refresh.
  spec.alertmanager_silences.enabled = false;
  store.Reload(spec);
  store.RefreshSilences();
  CHECK(store.Active(std::chrono::system_clock::now()).empty());
  CHECK(store.View().silence_sources.empty());
  CHECK_FALSE(store.SilenceRefreshInterval().has_value());
  server.stop();
  thread.join();
}
