// Declarations kept as Alertmanager silences, end to end: two real Alertmanager 0.25 servers
// gossiping on loopback, two detector processes, real PostgreSQL 15 double primaries, and
// silences made with amtool exactly as on-call makes them.
//
//   am1, am2   one Alertmanager cluster; every alert goes to both, both notify one webhook
//   det1       reads silences from am1 and am2
//   det2       reads silences from am2 only: what is declared on am1 reaches it by gossip
//   orders     o1 + o2, declared `rebuilding` on am1, then double-primaried; then expired
//   billing    b1 + b2, declared for 30 s, double-primaried, then am2 is stopped
#include <algorithm>
#include <catch2/catch.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "detector/config/declaration.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace sbd {
namespace {

using nlohmann::json;
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

constexpr double kProbeIntervalSeconds = 0.5;
constexpr double kRefreshSeconds = 1;

// Runs amtool against one Alertmanager; returns stdout, throws with the whole run on failure.
std::string Amtool(const AlertmanagerServer& am, std::vector<std::string> args) {
  std::vector<std::string> argv = {"amtool", "--alertmanager.url=" + am.url()};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto run = testing::RunCommandSplit(argv, false, seconds(30));
  if (run.exit_code != 0) {
    throw std::runtime_error(testing::DescribeCommandRun(argv, run.exit_code, run.out + run.err));
  }
  std::string out = run.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// `amtool silence add`: the new silence's id.
std::string AddSilence(const AlertmanagerServer& am, std::vector<std::string> matchers,
                       const std::string& duration, const std::string& comment) {
  matchers.insert(matchers.begin(), {"silence", "add", "--author=alice", "--duration=" + duration,
                                     "--comment=" + comment});
  return Amtool(am, matchers);
}

bool Firing(const WebhookReceiver::Delivery& d, const std::string& name,
            const std::string& cluster) {
  if (!d.body.contains("alerts")) return false;
  for (const auto& a : d.body["alerts"]) {
    if (a["labels"].value("alertname", "") == name && a["labels"].value("cluster", "") == cluster &&
        a.value("status", "") == "firing") {
      return true;
    }
  }
  return false;
}

struct Detector {
  int port = testing::FreeLoopbackPort();
  std::unique_ptr<DetectorProcess> process;

  json Status() const {
    const std::string body = HttpGet(port, "/status");
    return body.empty() ? json() : json::parse(body, nullptr, false);
  }
  std::string Verdict(const std::string& cluster) const {
    const json status = Status();
    if (!status.is_object()) return "";
    for (const auto& c : status["clusters"]) {
      if (c["name"] == cluster) return c.value("verdict", "");
    }
    return "";
  }
  bool HasDeclaration(const std::string& id) const {
    const json status = Status();
    if (!status.is_object()) return false;
    for (const auto& d : status["declarations"]) {
      if (d["id"] == id && d["active"] == true) return true;
    }
    return false;
  }
  std::vector<std::string> SilenceErrors() const {
    const json status = Status();
    std::vector<std::string> out;
    if (status.is_object() && status.contains("silence_errors")) {
      for (const auto& e : status["silence_errors"]) out.push_back(e.get<std::string>());
    }
    return out;
  }
  double Metric(const std::string& series) const {
    return MetricValue(HttpGet(port, "/metrics"), series);
  }
};

struct Sandbox {
  PgSandbox pg;
  PgInstance& o1 = pg.StartPrimary("o1");
  PgInstance& o2 = pg.StartReplica("o2", o1);
  PgInstance& b1 = pg.StartPrimary("b1");
  PgInstance& b2 = pg.StartReplica("b2", b1);
  WebhookReceiver webhook;
  AlertmanagerServer am1{pg.root() + "/am1", webhook.url(), "1s", "1s", {}, true};
  AlertmanagerServer am2{pg.root() + "/am2", webhook.url(), "1s", "1s", {am1.cluster_address()}};
  Detector det1, det2;

  Sandbox() {
    Start(det1, "det1", {am1.url(), am2.url()});
    Start(det2, "det2", {am2.url()});
  }

  std::string Member(const PgInstance& m) {
    return "      - name: " + m.name() + "\n        dsn: \"" + m.MonitorDsn() +
           "\"\n        password_file: " + pg.PasswordFile() + "\n";
  }

  void Start(Detector& det, const std::string& name, const std::vector<std::string>& sources) {
    const std::string timing = "    ttl: 3s\n    probe_interval: 500ms\n    probe_timeout: 400ms\n";
    std::string silence_sources;
    for (const auto& url : sources) silence_sources += "      - url: " + url + "\n";
    const std::string config = WriteFile(
        pg.root(), name + ".yml",
        "alerting:\n  alertmanagers:\n    - url: " + am1.url() + "\n    - url: " + am2.url() +
            "\n  resend_interval: 5s\nsuppressions:\n  max_duration: 1h\n"
            "  alertmanager_silences:\n    refresh_interval: 1s\n    timeout: 1s\n"
            "    alertmanagers:\n" +
            silence_sources + "clusters:\n  - name: orders\n" + timing + "    members:\n" +
            Member(o1) + Member(o2) + "  - name: billing\n" + timing + "    members:\n" +
            Member(b1) + Member(b2));
    det.process = std::make_unique<DetectorProcess>(
        SBD_BINARY,
        std::vector<std::string>{"--config.file=" + config,
                                 "--web.listen-address=127.0.0.1:" + std::to_string(det.port)},
        pg.root() + "/" + name + ".log");
    if (!WaitFor([&] { return HttpGet(det.port, "/-/ready") == "Ready\n"; }, seconds(30))) {
      throw std::runtime_error(name + " not ready:\n" + det.process->Log());
    }
  }
};

bool Contains(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("alertmanager silences: declared once with amtool, seen by every detector",
          "[silences][integration]") {
  Sandbox sb;
  INFO("detector logs: " << sb.pg.root() << "/det1.log, det2.log");

  {
    // 1. Three silences that cannot be declarations: reported with the reason by both
    //    detectors (det2 through am2's gossip), and declaring nothing.
    const std::string too_long =
        AddSilence(sb.am1, {"splitbrain_declaration=rebuilding", "cluster=orders"}, "2h",
                   "a rebuild that outlasts the maximum");
    const std::string unknown = AddSilence(
        sb.am1, {"splitbrain_declaration=maintenance", "cluster=orders"}, "30m", "unknown kind");
    const std::string no_cluster =
        AddSilence(sb.am1, {"splitbrain_declaration=rebuilding"}, "30m", "which cluster?");
    for (const Detector* det : {&sb.det1, &sb.det2}) {
      REQUIRE(WaitFor([&] { return det->SilenceErrors().size() == 3; }, seconds(10)));
      const auto errors = det->SilenceErrors();
      CHECK(Contains(errors, "silence " + too_long));
      CHECK(Contains(errors, "longer than the maximum 1h (suppressions.max_duration)"));
      CHECK(Contains(errors, "silence " + unknown));
      CHECK(Contains(errors, "unknown kind splitbrain_declaration=\"maintenance\""));
      CHECK(Contains(errors, "silence " + no_cluster));
      CHECK(Contains(errors, "no cluster matcher"));
      CHECK(det->Metric("splitbrain_declaration_silence_errors") == 3);
      CHECK(det->Metric("splitbrain_declarations{source=\"alertmanager\"}") == 0);
    }
  }

  const auto started = Clock::now();
  const std::string id = AddSilence(sb.am1, {"splitbrain_declaration=rebuilding", "cluster=orders"},
                                    "30m", "building the v17 cluster beside orders (CHG-1234)");
  {
    // 2. One silence on am1 reaches both detectors, det2 through am2.
    for (const Detector* det : {&sb.det1, &sb.det2}) {
      REQUIRE(WaitFor([&] { return det->HasDeclaration("am:" + id); }, seconds(10)));
      CHECK(det->Metric("splitbrain_declarations{source=\"alertmanager\"}") == 1);
    }
    std::cout << "silence on am1 seen by both detectors after "
              << std::chrono::duration<double>(Clock::now() - started).count() << " s\n";
    json det2_status = sb.det2.Status();
    for (const auto& d : det2_status["declarations"]) {
      if (d["id"] != "am:" + id) continue;
      CHECK(d["source"] == "alertmanager");
      CHECK(d["origin"] == sb.am2.url());
      CHECK(d["author"] == "alice");
      CHECK(d["reason"] == "building the v17 cluster beside orders (CHG-1234)");
    }
  }

  const auto since_promotion = Clock::now();
  {
    // 3. A real double primary in `orders`: suppressed by both, SplitBrainSuppressed, no page.
    sb.o2.Promote();
    for (const Detector* det : {&sb.det1, &sb.det2}) {
      REQUIRE(WaitFor([&] { return det->Verdict("orders") == "suppressed"; }, seconds(15)));
    }
    REQUIRE(sb.webhook.WaitFor(
        [&](const auto& d) { return Firing(d, "SplitBrainSuppressed", "orders"); },
        std::chrono::seconds(15)));
    // `check` shows where the declaration came from, and exits 8 (suppressed).
    const auto check = testing::RunCommandSplit(
        {SBD_BINARY, "check", "--config.file=" + sb.pg.root() + "/det1.yml"}, false, seconds(60));
    INFO(check.out << check.err);
    CHECK(check.exit_code == 8);
    CHECK(check.out.find("am:" + id + ": rebuilding of orders by alice (alertmanager " +
                         sb.am1.url()) != std::string::npos);
  }

  {
    // 4. `amtool silence expire` on am1: both detectors page within one probe interval plus
    //    the refresh period (det2 learns it from am2, plus the gossip).
    const auto expired = Clock::now();
    Amtool(sb.am1, {"silence", "expire", id});
    double to_verdict[2] = {-1, -1};
    int i = 0;
    for (const Detector* det : {&sb.det1, &sb.det2}) {
      REQUIRE(WaitFor([&] { return det->Verdict("orders") == "split_brain"; }, seconds(15)));
      to_verdict[i++] = std::chrono::duration<double>(Clock::now() - expired).count();
    }
    REQUIRE(sb.webhook.WaitFor([&](const auto& d) { return Firing(d, "SplitBrain", "orders"); },
                               std::chrono::seconds(15)));
    std::cout << "expired on am1: det1 split_brain after " << to_verdict[0]
              << " s, det2 (via am2) after " << to_verdict[1] << " s\n";
    // One probe interval and one refresh, with room for a confirmation round and the polling.
    CHECK(to_verdict[0] < kProbeIntervalSeconds + kRefreshSeconds + 1.5);
    CHECK(to_verdict[1] < kProbeIntervalSeconds + kRefreshSeconds + 2.5);
    // No SplitBrain for orders before the silence was expired.
    for (const auto& d : sb.webhook.Deliveries()) {
      if (d.at >= since_promotion && d.at < expired) CHECK_FALSE(Firing(d, "SplitBrain", "orders"));
    }
  }
}

TEST_CASE("alertmanager silences: an Alertmanager that stops keeps its declarations until expiry",
          "[silences][integration]") {
  Sandbox sb;
  INFO("detector logs: " << sb.pg.root() << "/det1.log, det2.log");
  const std::string id =
      AddSilence(sb.am2, {"splitbrain_declaration=provisioning", "cluster=billing"}, "25s",
                 "provisioning billing v2 (CHG-77)");
  for (const Detector* det : {&sb.det1, &sb.det2}) {
    REQUIRE(WaitFor([&] { return det->HasDeclaration("am:" + id); }, seconds(10)));
  }
  WallTime expires{};
  const json declared = sb.det2.Status();  // a local: a temporary would dangle
  for (const auto& d : declared["declarations"]) {
    if (d["id"] == "am:" + id) expires = *ParseRfc3339(d["expires"].get<std::string>());
  }
  REQUIRE(expires > WallTime{});
  sb.b2.Promote();
  REQUIRE(WaitFor([&] { return sb.det2.Verdict("billing") == "suppressed"; }, seconds(15)));

  // det2 reads only am2: stopped, it cannot read anything, and says so.
  sb.am2.Stop();
  const std::string up =
      "splitbrain_alertmanager_silences_up{alertmanager=\"" + sb.am2.url() + "\"}";
  REQUIRE(WaitFor([&] { return sb.det2.Metric(up) == 0; }, seconds(5)));
  const json status = sb.det2.Status();
  REQUIRE(status["silence_sources"].size() == 1);
  CHECK(status["silence_sources"][0]["up"] == false);
  CHECK(status["silence_sources"][0]["error"].get<std::string>().find("cannot connect") !=
        std::string::npos);
  CHECK(HttpGet(sb.det2.port, "/status?format=text").find("UNREADABLE") != std::string::npos);
  // The declaration stays, never extended: still suppressed while it runs...
  REQUIRE(std::chrono::system_clock::now() < expires - seconds(3));
  CHECK(sb.det2.HasDeclaration("am:" + id));
  CHECK(sb.det2.Verdict("billing") == "suppressed");
  // ...and a split brain once it has expired.
  REQUIRE(WaitFor([&] { return sb.det2.Verdict("billing") == "split_brain"; }, seconds(40)));
  CHECK(std::chrono::system_clock::now() >= expires);
  std::cout << "am2 stopped: det2 paged "
            << std::chrono::duration<double>(std::chrono::system_clock::now() - expires).count()
            << " s after the declaration's own expiry\n";
  CHECK(sb.det2.Metric(up) == 0);

  // A silence that hides the page itself is called out on /status and in the metrics.
  AddSilence(sb.am1, {"alertname=~SplitBrain.*", "cluster=billing"}, "10m", "too noisy");
  REQUIRE(WaitFor([&] { return sb.det1.Metric("splitbrain_alertmanager_page_silences") == 1; },
                  seconds(10)));
  CHECK(HttpGet(sb.det1.port, "/status?format=text")
            .find("WARNING: the SplitBrain page is being silenced in Alertmanager") !=
        std::string::npos);
  CHECK(sb.det1.process->Log().find("the split-brain page is being silenced in Alertmanager") !=
        std::string::npos);
}

namespace {

// The silence ids that mute the detector's firing SplitBrain of `cluster` in `am`, as
// Alertmanager itself decides it (status.silencedBy of the alert it holds).
std::vector<std::string> MutedBy(const AlertmanagerServer& am, const std::string& cluster) {
  std::vector<std::string> ids;
  for (const auto& a : am.Alerts()) {
    if (a["labels"].value("alertname", "") != "SplitBrain" ||
        a["labels"].value("cluster", "") != cluster) {
      continue;
    }
    for (const auto& id : a["status"]["silencedBy"]) ids.push_back(id.get<std::string>());
  }
  return ids;
}

bool Has(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

TEST_CASE(
    "alertmanager silences: a silence on lock_kind or a declaration regex that mutes the page "
    "is called out",
    "[silences][integration]") {
  Sandbox sb;
  INFO("detector logs: " << sb.pg.root() << "/det1.log, det2.log");
  sb.b2.Promote();
  REQUIRE(WaitFor([&] { return sb.det1.Verdict("billing") == "split_brain"; }, seconds(15)));
  // The detector's own page reaches am1 with its full label set (lock_kind included).
  REQUIRE(WaitFor(
      [&] {
        for (const auto& a : sb.am1.Alerts()) {
          if (a["labels"].value("alertname", "") == "SplitBrain" &&
              a["labels"].value("cluster", "") == "billing" &&
              a["labels"].value("lock_kind", "") == "postgres") {
            return true;
          }
        }
        return false;
      },
      seconds(15)));
  CHECK(sb.det1.Metric("splitbrain_alertmanager_page_silences") == 0);

  // 1. On a label every alert carries: Alertmanager mutes the page, and the detector says so.
  const std::string by_kind = AddSilence(sb.am1, {"lock_kind=postgres"}, "10m", "noisy");
  REQUIRE(WaitFor([&] { return Has(MutedBy(sb.am1, "billing"), by_kind); }, seconds(10)));
  REQUIRE(WaitFor([&] { return sb.det1.Metric("splitbrain_alertmanager_page_silences") == 1; },
                  seconds(10)));
  CHECK(HttpGet(sb.det1.port, "/status?format=text").find("silence " + by_kind) !=
        std::string::npos);
  Amtool(sb.am1, {"silence", "expire", by_kind});
  REQUIRE(WaitFor([&] { return sb.det1.Metric("splitbrain_alertmanager_page_silences") == 0; },
                  seconds(10)));

  // 2. With a regex on splitbrain_declaration: no declaration, and a page silence, the same
  //    decision Alertmanager makes.
  const std::string by_regex = AddSilence(
      sb.am1, {"alertname=SplitBrain", "splitbrain_declaration=~.*"}, "10m", "looks like one");
  REQUIRE(WaitFor([&] { return Has(MutedBy(sb.am1, "billing"), by_regex); }, seconds(10)));
  for (const Detector* det : {&sb.det1, &sb.det2}) {
    REQUIRE(WaitFor([&] { return det->Metric("splitbrain_alertmanager_page_silences") == 1; },
                    seconds(10)));
    CHECK(Contains(det->SilenceErrors(), "silence " + by_regex));
    CHECK(det->Metric("splitbrain_declarations{source=\"alertmanager\"}") == 0);
  }
  CHECK(HttpGet(sb.det2.port, "/status?format=text").find("silence " + by_regex) !=
        std::string::npos);
}

}  // namespace sbd
