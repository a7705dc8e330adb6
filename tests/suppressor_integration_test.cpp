// The suppressors against real PostgreSQL 15 servers, a real Alertmanager 0.25 and the detector
// binary: the recorded false-positive classes replayed with their negative controls.
//
//   main        m1 (primary), m2 (replica), and `old`, a leftover standalone primary of another
//               lineage: all three from a file_sd JSON file, labelled cluster=main
//   green       g1, a standby of m1 (same lineage) in its own cluster, from a file_sd YAML file:
//               promoted at cutover while m1 still takes writes
//   build       b1 + b2, declared `provisioning` through the HTTP API, then double-primaried
//   undeclared  u1 + u2, double-primaried while `build` is declared: must page within one TTL
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "detector/config/declaration.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace sbd {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::AlertmanagerServer;
using testing::DetectorProcess;
using testing::HttpGet;
using testing::MetricValue;
using testing::PgInstance;
using testing::PgSandbox;
using testing::WaitFor;
using testing::WebhookReceiver;
using testing::WriteFile;
using Clock = std::chrono::steady_clock;

constexpr int kUndeclaredTtlSeconds = 6;

std::string Target(const PgInstance& m) { return "127.0.0.1:" + std::to_string(m.port()); }

// Every alert (name, cluster) delivered to the webhook after `since`, firing or resolved.
struct Seen {
  std::string name, cluster, status;
  Clock::time_point at;
  std::chrono::system_clock::time_point wall;
};
std::vector<Seen> Delivered(const WebhookReceiver& webhook, Clock::time_point since) {
  std::vector<Seen> out;
  for (const auto& d : webhook.Deliveries()) {
    if (d.at < since || !d.body.contains("alerts")) continue;
    for (const auto& a : d.body["alerts"]) {
      out.push_back({a["labels"].value("alertname", ""), a["labels"].value("cluster", ""),
                     a.value("status", ""), d.at, d.wall});
    }
  }
  return out;
}
std::optional<Seen> First(const WebhookReceiver& webhook, const std::string& name,
                          const std::string& cluster, Clock::time_point since = {}) {
  for (const auto& s : Delivered(webhook, since)) {
    if (s.name == name && s.cluster == cluster && s.status == "firing") return s;
  }
  return std::nullopt;
}

// Waits until a firing `name` for `cluster` reaches the webhook (the predicate runs under the
// receiver's lock, so it reads only the delivery it is given).
bool WaitForAlert(const WebhookReceiver& webhook, const std::string& name,
                  const std::string& cluster, seconds deadline) {
  return webhook.WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        if (!d.body.contains("alerts")) return false;
        for (const auto& a : d.body["alerts"]) {
          if (a["labels"].value("alertname", "") == name &&
              a["labels"].value("cluster", "") == cluster && a.value("status", "") == "firing") {
            return true;
          }
        }
        return false;
      },
      deadline);
}

struct Sandbox {
  PgSandbox pg;
  PgInstance& m1 = pg.StartPrimary("m1");
  PgInstance& m2 = pg.StartReplica("m2", m1);
  PgInstance& g1 = pg.StartReplica("g1", m1);
  PgInstance& old = pg.StartPrimary("old");
  PgInstance& b1 = pg.StartPrimary("b1");
  PgInstance& b2 = pg.StartReplica("b2", b1);
  PgInstance& u1 = pg.StartPrimary("u1");
  PgInstance& u2 = pg.StartReplica("u2", u1);
  WebhookReceiver webhook;
  AlertmanagerServer alertmanager{pg.root() + "/am", webhook.url()};
  std::string dropins = pg.root() + "/declarations.d";
  std::string config;
  int port = testing::FreeLoopbackPort();
  std::unique_ptr<DetectorProcess> detector;

  Sandbox() {
    mkdir(dropins.c_str(), 0755);
    WriteFile(pg.root(), "main.json",
              json::array({{{"targets", {Target(m1), Target(m2)}},
                            {"labels", {{"cluster", "main"}, {"env", "prod"}}}},
                           {{"targets", {Target(old)}},
                            {"labels", {{"cluster", "main"}, {"env", "prod"}}}}})
                  .dump(1));
    WriteFile(pg.root(), "green.yml",
              "- targets: ['" + Target(g1) + "']\n  labels:\n    cluster: green\n");
    auto member = [&](const PgInstance& m) {
      return "      - name: " + m.name() + "\n        dsn: \"" + m.MonitorDsn() +
             "\"\n        password_file: " + pg.PasswordFile() + "\n";
    };
    const std::string timing = "    ttl: 3s\n    probe_interval: 500ms\n    probe_timeout: 400ms\n";
    const std::string file_sd =
        "      group_by: cluster\n      dsn: \"user=splitbrain dbname=postgres\"\n"
        "      password_file: " +
        pg.PasswordFile() + "\n";
    config =
        WriteFile(pg.root(), "detector.yml",
                  "alerting:\n  alertmanagers:\n    - url: " + alertmanager.url() +
                      "\n  resend_interval: 5s\nsuppressions:\n  dropin_dir: " + dropins +
                      "\n  state_file: " + pg.root() +
                      "/declarations.json\nclusters:\n"
                      "  - name: main\n" +
                      timing + "    file_sd:\n      files: [" + pg.root() + "/main.json]\n" +
                      file_sd + "  - name: green\n" + timing + "    file_sd:\n      files: [" +
                      pg.root() + "/green.yml]\n" + file_sd + "  - name: build\n" + timing +
                      "    members:\n" + member(b1) + member(b2) +
                      "  - name: undeclared\n    ttl: " + std::to_string(kUndeclaredTtlSeconds) +
                      "s\n    probe_interval: 500ms\n    probe_timeout: 400ms\n    members:\n" +
                      member(u1) + member(u2));
    Start();
  }

  void Start() {
    detector = std::make_unique<DetectorProcess>(
        SBD_BINARY,
        // Without basic auth the API refuses changes; this sandbox opens it explicitly.
        std::vector<std::string>{"--config.file=" + config,
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port),
                                 "--web.allow-unauthenticated-changes"},
        pg.root() + "/detector.log");
    if (!WaitFor([&] { return HttpGet(port, "/-/ready") == "Ready\n"; }, seconds(30))) {
      throw std::runtime_error("detector not ready:\n" + detector->Log());
    }
  }

  json Status() const {
    const std::string body = HttpGet(port, "/status");
    return body.empty() ? json() : json::parse(body);
  }
  json Cluster(const std::string& name) const {
    const json status = Status();
    if (status.is_null()) return json();
    for (const auto& c : status["clusters"]) {
      if (c["name"] == name) return c;
    }
    return json();
  }
  std::string Verdict(const std::string& name) const {
    const json c = Cluster(name);
    return c.is_null() ? "" : c.value("verdict", "");
  }
  httplib::Result Api(const std::string& method, const std::string& path,
                      const std::string& body = "") const {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(5, 0);
    if (method == "POST") return client.Post(path.c_str(), body, "application/json");
    if (method == "DELETE") return client.Delete(path.c_str());
    return client.Get(path.c_str());
  }
};

bool HasSuppression(const json& cluster, const std::string& suppressor) {
  if (!cluster.contains("suppressions")) return false;
  for (const auto& s : cluster["suppressions"]) {
    if (s["suppressor"] == suppressor) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("suppressors: replayed false positives page nobody; real double primaries still page",
          "[suppressors][postgres]") {
  Sandbox sb;
  const auto start = Clock::now();
  // On a failed REQUIRE, the detector's own account of what it saw.
  struct PrintLogOnFailure {
    Sandbox& sb;
    ~PrintLogOnFailure() {
      if (std::uncaught_exceptions() > 0 && sb.detector) {
        std::cout << "detector log:\n" << sb.detector->Log() << "\n";
      }
    }
  } print_log{sb};

  // A malformed drop-in file beside a good one: an error with file, line and column; the good
  // one works.
  WriteFile(sb.dropins, "broken.yml", "kind: cutover\ncluster: green\nreason: [oops\n");
  WriteFile(sb.dropins, "cutover-green.yml",
            "kind: cutover\ncluster: green\nreason: blue-green cutover CHG-7\nauthor: carol\n"
            "expires: " +
                FormatRfc3339(std::chrono::system_clock::now() + std::chrono::hours(2)) + "\n");
  REQUIRE(WaitFor(
      [&] {
        const json s = sb.Status();
        if (s.is_null() || s["declaration_errors"].empty()) return false;
        bool active = false;
        for (const auto& d : s["declarations"]) active |= d["id"] == "cutover-green.yml";
        return active;
      },
      seconds(10)));
  {
    const json s = sb.Status();
    const std::string error = s["declaration_errors"][0];
    INFO(error);
    CHECK(error.rfind(sb.dropins + "/broken.yml:", 0) == 0);
    // file:line:column: message
    CHECK(std::count(error.begin(), error.end(), ':') >= 3);
    CHECK(MetricValue(HttpGet(sb.port, "/metrics"), "splitbrain_declaration_file_errors") == 1);
  }

  {
    // 1. A leftover standalone PostgreSQL (another lineage, writable) grouped under main's
    //    label: drift, with the label_regrouping suppression on record; no page.
    INFO("main: " << sb.Cluster("main").dump(1));
    REQUIRE(WaitFor([&] { return sb.Verdict("main") == "drift"; }, seconds(15)));
    const json main = sb.Cluster("main");
    CHECK(main["members"].size() == 3);
    const json drift = main["evidence"]["drift"];
    CHECK(drift == json::array({Target(sb.old)}));
    CHECK(main["evidence"]["writable"].size() == 1);
    CHECK(HasSuppression(main, "label_regrouping"));
    const std::string metrics = HttpGet(sb.port, "/metrics");
    CHECK(metrics.find("suppressor=\"label_regrouping\"") != std::string::npos);
  }

  {
    // 2. Cutover: green's standby promoted while m1 still writes. Declared by the drop-in: the
    //    fork is visible, valued 0, and warns nobody.
    sb.g1.Promote();
    const auto promoted = Clock::now();
    REQUIRE(WaitFor(
        [&] {
          const json green = sb.Cluster("green");
          return !green.is_null() && !green["lineage_forks"].empty() &&
                 green["lineage_forks"][0].value("declared_by", "") == "cutover-green.yml";
        },
        seconds(15)));
    CHECK(sb.Verdict("green") == "healthy");
    const std::string metrics = HttpGet(sb.port, "/metrics");
    CHECK(metrics.find("splitbrain_cluster_lineage_forked{cluster=\"green\"") != std::string::npos);
    CHECK(metrics.find("hidden_verdict=\"lineage_forked\"") != std::string::npos);
    // Longer than the three rounds a warning needs, plus Alertmanager's group_wait.
    REQUIRE_FALSE(WaitFor([&] { return First(sb.webhook, "LineageForked", "green").has_value(); },
                          seconds(4)));

    //    Undeclared (the file removed): a warning, never a split-brain page.
    REQUIRE(unlink((sb.dropins + "/cutover-green.yml").c_str()) == 0);
    REQUIRE(WaitForAlert(sb.webhook, "LineageForked", "green", seconds(20)));
    for (const auto& s : Delivered(sb.webhook, start)) {
      INFO(s.name << " " << s.cluster);
      CHECK(s.name != "SplitBrain");
    }
    std::cout << "cutover: LineageForked delivered "
              << std::chrono::duration<double>(First(sb.webhook, "LineageForked", "green")->at -
                                               promoted)
                     .count()
              << " s after the promotion (its file removed after the declared phase)\n";
  }

  {
    // 3. `build` declared provisioning through the API for 25 s; then a real double primary in
    //    it, and another in `undeclared`.
    auto posted = sb.Api("POST", "/api/v1/declarations",
                         R"({"kind": "provisioning", "cluster": "build", "reason": "building )"
                         R"(the v17 cluster CHG-9", "author": "dave", "duration": "25s"})");
    REQUIRE(posted);
    INFO(posted->body);
    REQUIRE(posted->status == 201);
    const json declaration = json::parse(posted->body);
    const auto expires = *ParseRfc3339(declaration["expires"]);

    sb.b2.Promote();
    REQUIRE(WaitFor([&] { return sb.Verdict("build") == "suppressed"; }, seconds(10)));
    const json build = sb.Cluster("build");
    CHECK(build["raw_verdict"] == "split_brain");
    CHECK(build["suppressed_split_brain"] == true);
    REQUIRE(build["suppressions"].size() == 1);
    CHECK(build["suppressions"][0]["reason"] == "building the v17 cluster CHG-9");
    CHECK(MetricValue(
              HttpGet(sb.port, "/metrics"),
              "splitbrain_suppressed_split_brain{cluster=\"build\",suppressor=\"provisioning\","
              "reason=\"building the v17 cluster CHG-9\"}") == 1);

    // While `build` is declared, a double primary elsewhere pages within one TTL.
    sb.u2.Promote();
    const auto onset = Clock::now();
    REQUIRE(
        WaitForAlert(sb.webhook, "SplitBrain", "undeclared", seconds(3 * kUndeclaredTtlSeconds)));
    const double to_page =
        std::chrono::duration<double>(First(sb.webhook, "SplitBrain", "undeclared")->at - onset)
            .count();
    std::cout << "undeclared: promotion to page " << to_page << " s (TTL " << kUndeclaredTtlSeconds
              << " s)\n";
    CHECK(to_page < kUndeclaredTtlSeconds);

    // The declared one warns with its reason, and does not page...
    REQUIRE(WaitForAlert(sb.webhook, "SplitBrainSuppressed", "build", seconds(10)));
    CHECK_FALSE(First(sb.webhook, "SplitBrain", "build").has_value());

    // ...until its declaration expires: then it pages.
    REQUIRE(WaitForAlert(sb.webhook, "SplitBrain", "build", seconds(60)));
    const auto paged = First(sb.webhook, "SplitBrain", "build")->wall;
    CHECK(paged >= expires);
    std::cout << "build: paged " << std::chrono::duration<double>(paged - expires).count()
              << " s after its declaration expired\n";
    CHECK(sb.Verdict("build") == "split_brain");
  }

  {
    // 4. The API: validation, listing, removal rules, and persistence across a restart.
    auto too_long = sb.Api("POST", "/api/v1/declarations",
                           R"({"kind": "rebuilding", "cluster": "main", "reason": "r", )"
                           R"("author": "erin", "duration": "48h"})");
    REQUIRE(too_long);
    CHECK(too_long->status == 400);
    CHECK(too_long->body.find("more than the maximum 1d") != std::string::npos);
    auto no_author = sb.Api("POST", "/api/v1/declarations",
                            R"({"kind": "rebuilding", "cluster": "main", "reason": "r", )"
                            R"("duration": "1h"})");
    REQUIRE(no_author);
    CHECK(no_author->status == 400);
    CHECK(no_author->body.find("author: required") != std::string::npos);

    auto kept =
        sb.Api("POST", "/api/v1/declarations",
               R"({"kind": "rebuilding", "cluster": "main", "scope": "main-v18", )"
               R"("reason": "rebuild of the v18 replica", "author": "erin", "duration": "1h"})");
    REQUIRE(kept);
    REQUIRE(kept->status == 201);
    const std::string id = json::parse(kept->body)["id"];

    sb.detector->Signal(SIGTERM);
    REQUIRE(WaitFor([&] { return HttpGet(sb.port, "/-/healthy").empty(); }, seconds(10)));
    sb.detector.reset();
    sb.Start();
    auto listed = sb.Api("GET", "/api/v1/declarations");
    REQUIRE(listed);
    INFO("listed after the restart: " << listed->body << "\ndetector log:\n" << sb.detector->Log());
    bool found = false;
    const json listing = json::parse(listed->body);  // a local: a temporary would dangle
    for (const auto& d : listing["declarations"]) {
      if (d["id"] == id) {
        found = true;
        CHECK(d["author"] == "unauthenticated:erin");
        CHECK(d["active"] == true);
      }
    }
    CHECK(found);
    CHECK(MetricValue(HttpGet(sb.port, "/metrics"),
                      "splitbrain_declaration_expiry_timestamp_seconds{id=\"" + id +
                          "\",kind=\"rebuilding\",cluster=\"main\",scope=\"main-v18\",member=\"\","
                          "source=\"api\"}") > 0);

    auto missing = sb.Api("DELETE", "/api/v1/declarations/api-000000000000");
    REQUIRE(missing);
    CHECK(missing->status == 404);
    auto removed = sb.Api("DELETE", "/api/v1/declarations/" + id);
    REQUIRE(removed);
    CHECK(removed->status == 200);
    listed = sb.Api("GET", "/api/v1/declarations");
    CHECK(listed->body.find(id) == std::string::npos);
  }

  // Through everything: main (leftover node, cutover) and green never paged.
  for (const auto& s : Delivered(sb.webhook, start)) {
    if (s.name != "SplitBrain") continue;
    INFO(s.cluster);
    CHECK((s.cluster == "undeclared" || s.cluster == "build"));
  }
}

}  // namespace sbd
