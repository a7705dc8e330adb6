// End-to-end tests of the Prometheus backstop path and of its deduplication against the
// detector's direct push: the real detector binary, scraped by a real Prometheus 2.x that
// evaluates the rendered rules/ and alerts a real Alertmanager 0.25, which notifies a webhook
// receiver inside the test. A real double primary is forced by promoting a streaming replica of
// a PostgreSQL 15 primary.
#include <httplib.h>

#include <catch2/catch.hpp>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"
#include "tests/support/prometheus_sandbox.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

using sbd::testing::AlertmanagerServer;
using sbd::testing::DetectorProcess;
using sbd::testing::FreeLoopbackPort;
using sbd::testing::HasLine;
using sbd::testing::HttpGet;
using sbd::testing::PgInstance;
using sbd::testing::PgSandbox;
using sbd::testing::PrometheusServer;
using sbd::testing::RenderRules;
using sbd::testing::TempDir;
using sbd::testing::WaitFor;
using sbd::testing::WebhookReceiver;
using sbd::testing::WriteFile;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

constexpr const char* kCluster = "demo";
// The Alertmanagers' group_wait and group_interval.
constexpr seconds kGroupWait{1};
constexpr seconds kGroupInterval{1};
// AlertmanagerServer's --cluster.peer-timeout: the second peer of a cluster waits this long
// before it looks whether the first one already notified.
constexpr seconds kPeerTimeout{1};

double Since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

std::string Fixed(double seconds) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << seconds;
  return out.str();
}

// ---- The detector ------------------------------------------------------------------------------

// A postgres-kind cluster `demo` with the given members; direct push to `alertmanagers` (none:
// no alerting section at all, the detector then pushes nothing).
std::string DetectorYaml(const PgSandbox& sandbox, const std::vector<const PgInstance*>& members,
                         const std::vector<std::string>& alertmanagers) {
  std::ostringstream out;
  if (!alertmanagers.empty()) {
    out << "alerting:\n  alertmanagers:\n";
    for (const auto& url : alertmanagers) out << "    - url: " << url << "\n";
  }
  out << "clusters:\n"
      << "  - name: " << kCluster << "\n"
      << "    ttl: 3s\n"
      << "    probe_interval: 500ms\n"
      << "    probe_timeout: 400ms\n"
      << "    members:\n";
  for (const PgInstance* m : members) {
    out << "      - name: " << m->name() << "\n        dsn: \"" << m->MonitorDsn()
        << "\"\n        password_file: " << sandbox.PasswordFile() << "\n";
  }
  return out.str();
}

// One detector process on 127.0.0.1:port, with its config and log in `dir`.
struct Detector {
  std::string name;
  int port = 0;
  std::unique_ptr<DetectorProcess> process;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }
};

// Starts the detector and waits until /-/ready (every cluster had its first round).
void StartDetector(Detector& d, const std::string& dir, const std::string& yaml) {
  const std::string config = WriteFile(dir, d.name + ".yml", yaml);
  d.process = std::make_unique<DetectorProcess>(
      SBD_BINARY,
      std::vector<std::string>{"--config.file=" + config,
                               "--web.listen-address=127.0.0.1:" + std::to_string(d.port)},
      dir + "/" + d.name + ".log");
  const bool ready = WaitFor([&] { return HttpGet(d.port, "/-/ready") == "Ready\n"; }, seconds(20),
                             milliseconds(50));
  INFO(d.name << " log:\n" << d.process->Log());
  REQUIRE(ready);
}

bool DetectorSays(const Detector& d, const std::string& verdict) {
  return HasLine(HttpGet(d.port, "/metrics"), std::string("splitbrain_cluster_verdict{cluster=\"") +
                                                  kCluster + "\",verdict=\"" + verdict + "\"} 1");
}

// The values of every series of metric `name` in an exposition.
std::vector<double> ValuesOf(const std::string& body, const std::string& name) {
  std::istringstream in(body);
  std::vector<double> values;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0 && line.rfind(name + " ", 0) != 0) continue;
    const auto space = line.rfind(' ');
    if (space != std::string::npos) values.push_back(std::stod(line.substr(space + 1)));
  }
  return values;
}

// Sum of every series of metric `name` in an exposition (0 if none).
double SumOf(const std::string& body, const std::string& name) {
  double sum = 0;
  for (double v : ValuesOf(body, name)) sum += v;
  return sum;
}

// ---- What reached the webhook -------------------------------------------------------------------

bool AlertIs(const Json& alert, const std::string& alertname, const std::string& cluster,
             const std::string& status) {
  if (!alert.is_object() || alert.value("status", "") != status) return false;
  const Json& labels = alert.value("labels", Json::object());
  return labels.value("alertname", "") == alertname &&
         (cluster.empty() || labels.value("cluster", "") == cluster);
}

// How many alerts of this delivery (an Alertmanager notification) match.
int CountIn(const WebhookReceiver::Delivery& d, const std::string& alertname,
            const std::string& cluster, const std::string& status = "firing") {
  int n = 0;
  if (!d.body.is_object() || !d.body.contains("alerts")) return 0;
  for (const auto& alert : d.body["alerts"]) n += AlertIs(alert, alertname, cluster, status);
  return n;
}

// One alert of one notification.
struct Notified {
  size_t delivery;  // index among all deliveries
  Clock::time_point at;
  Json alert;
};

// Every notified alert matching, across all deliveries, in arrival order.
std::vector<Notified> Notifications(const WebhookReceiver& webhook, const std::string& alertname,
                                    const std::string& cluster,
                                    const std::string& status = "firing") {
  std::vector<Notified> out;
  const auto deliveries = webhook.Deliveries();
  for (size_t i = 0; i < deliveries.size(); ++i) {
    const auto& body = deliveries[i].body;
    if (!body.is_object() || !body.contains("alerts")) continue;
    for (const auto& alert : body["alerts"]) {
      if (AlertIs(alert, alertname, cluster, status)) out.push_back({i, deliveries[i].at, alert});
    }
  }
  return out;
}

// Waits until at least `n` matching alerts have been notified in total (past deliveries count).
bool WaitForNotifications(const WebhookReceiver& webhook, const std::string& alertname,
                          const std::string& cluster, int n, milliseconds deadline) {
  int seen = 0;  // each delivery is tested exactly once
  return webhook.WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        seen += CountIn(d, alertname, cluster);
        return seen >= n;
      },
      deadline);
}

std::string Describe(const Notified& n, Clock::time_point t0) {
  std::ostringstream out;
  out << "delivery #" << n.delivery << " at +" << Fixed(Since(t0, n.at))
      << "s labels=" << n.alert.value("labels", Json::object()).dump()
      << " summary=" << n.alert["annotations"].value("summary", "").substr(0, 90)
      << " generatorURL=" << n.alert.value("generatorURL", "").substr(0, 60);
  return out.str();
}

// ---- Prometheus ---------------------------------------------------------------------------------

// The first rule alert in `state` whose labels include all of `labels`, or null.
Json RuleAlert(const PrometheusServer& prom, const Json& labels,
               const std::string& state = "firing") {
  try {
    for (const auto& a : prom.Alerts()) {
      if (a.value("state", "") != state) continue;
      const Json& have = a.value("labels", Json::object());
      bool all = true;
      for (const auto& [key, value] : labels.items()) all = all && have.value(key, "") == value;
      if (all) return a;
    }
  } catch (const std::exception&) {
  }
  return nullptr;
}

Json SplitBrainLabels() { return {{"alertname", "SplitBrain"}, {"cluster", kCluster}}; }

size_t ResultSize(const PrometheusServer& prom, const std::string& promql) {
  try {
    return prom.Query(promql).at("result").size();
  } catch (const std::exception&) {
    return 0;
  }
}

// Alerts Prometheus' notifier has sent so far, to every Alertmanager together.
double PrometheusNotificationsSent(const PrometheusServer& prom) {
  return SumOf(prom.SelfMetrics(), "prometheus_notifications_sent_total");
}

// Waits until Prometheus has scraped every detector and sees the cluster healthy through each
// (PrometheusServer's constructor already waited until its notifier knows every Alertmanager),
// and until no rule alert but the always-firing watchdog is pending or firing: nothing is broken
// before the test breaks it on purpose.
void WaitForHealthyScrapes(const PrometheusServer& prom, size_t detectors) {
  const bool scraped = WaitFor(
      [&] {
        return ResultSize(prom, "up{job=\"splitbrain-detector\"} == 1") == detectors &&
               ResultSize(prom, std::string("splitbrain_cluster_verdict{cluster=\"") + kCluster +
                                    "\",verdict=\"healthy\"} == 1") == detectors;
      },
      seconds(30), milliseconds(200));
  INFO("prometheus log:\n" << prom.LogTail());
  REQUIRE(scraped);
  // Before the first scrape absent(up{job=...}) holds, so SplitBrainDetectorDown is pending
  // until the evaluation after it; wait for that too.
  auto others = [&] {
    Json active = Json::array();
    for (const auto& a : prom.Alerts()) {
      if (a["labels"].value("alertname", "") != "SplitBrainWatchdog") active.push_back(a);
    }
    return active;
  };
  const bool quiet = WaitFor([&] { return others().empty(); }, seconds(10), milliseconds(200));
  INFO("rule alerts other than the watchdog before the fault: " << others().dump(2));
  REQUIRE(quiet);
}

// ---- Alertmanager -------------------------------------------------------------------------------

// GET /api/v2/status: cluster.status is "ready" (gossip settled) with `peers` peers.
bool ClusterReady(const AlertmanagerServer& am, size_t peers) {
  httplib::Client client("127.0.0.1", am.port());
  client.set_connection_timeout(1, 0);
  client.set_read_timeout(2, 0);
  auto res = client.Get("/api/v2/status");
  if (!res || res->status != 200) return false;
  const Json status = Json::parse(res->body, nullptr, false);
  if (status.is_discarded() || !status.contains("cluster")) return false;
  const Json& cluster = status["cluster"];
  return cluster.value("status", "") == "ready" && cluster.contains("peers") &&
         cluster["peers"].size() == peers;
}

// Active alerts `alertname` of the cluster that this Alertmanager holds.
size_t ActiveIn(const AlertmanagerServer& am, const std::string& alertname) {
  size_t n = 0;
  try {
    for (const auto& a : am.Alerts()) {
      const Json& labels = a.value("labels", Json::object());
      n += labels.value("alertname", "") == alertname && labels.value("cluster", "") == kCluster &&
           a.value("status", Json::object()).value("state", "") == "active";
    }
  } catch (const std::exception&) {
  }
  return n;
}

// The active alert `alertname` of the cluster in this Alertmanager (as merged from every source
// that sent it: the latest sender's annotations), or null.
Json ActiveAlert(const AlertmanagerServer& am, const std::string& alertname) {
  try {
    for (const auto& a : am.Alerts()) {
      const Json& labels = a.value("labels", Json::object());
      if (labels.value("alertname", "") == alertname && labels.value("cluster", "") == kCluster) {
        return a;
      }
    }
  } catch (const std::exception&) {
  }
  return nullptr;
}

// Lines of the Alertmanager's log holding every one of `words`.
int LogLines(const AlertmanagerServer& am, const std::vector<std::string>& words) {
  std::istringstream in(am.LogTail(100000));
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    bool all = true;
    for (const auto& w : words) all = all && line.find(w) != std::string::npos;
    n += all;
  }
  return n;
}

// ---- Timeline of one fault ----------------------------------------------------------------------

// Polls named probes until every one has happened; records when each was first seen (or, for
// probes that know it, when it happened), relative to t0.
class Timeline {
 public:
  using Probe = std::function<std::optional<Clock::time_point>()>;

  explicit Timeline(Clock::time_point t0) : t0_(t0) {}

  // A condition polled every 100 ms; it happened when first seen true.
  void AddCondition(const std::string& name, std::function<bool()> cond) {
    Add(name,
        [cond] { return cond() ? std::optional<Clock::time_point>(Clock::now()) : std::nullopt; });
  }
  void Add(const std::string& name, Probe probe) {
    order_.push_back(name);
    probes_[name] = std::move(probe);
  }
  // True when all happened within `deadline` (from now).
  bool WaitAll(milliseconds deadline) {
    return WaitFor(
        [&] {
          bool all = true;
          for (const auto& name : order_) {
            if (seen_.count(name)) continue;
            std::optional<Clock::time_point> at;
            try {
              at = probes_[name]();
            } catch (const std::exception&) {
            }
            if (at) {
              seen_[name] = *at;
            } else {
              all = false;
            }
          }
          return all;
        },
        deadline, milliseconds(100));
  }
  Clock::time_point At(const std::string& name) const { return seen_.at(name); }
  Clock::time_point Latest() const {
    Clock::time_point latest = t0_;
    for (const auto& [name, at] : seen_) latest = std::max(latest, at);
    return latest;
  }
  std::string Report() const {
    std::ostringstream out;
    for (const auto& name : order_) {
      auto it = seen_.find(name);
      out << "  " << std::left << std::setw(58) << name << " "
          << (it == seen_.end() ? "not seen" : "+" + Fixed(Since(t0_, it->second)) + "s") << "\n";
    }
    return out.str();
  }

 private:
  Clock::time_point t0_;
  std::vector<std::string> order_;
  std::map<std::string, Probe> probes_;
  std::map<std::string, Clock::time_point> seen_;
};

// The first notified alert matching, as a Timeline probe: when it arrived.
Timeline::Probe FirstNotification(const WebhookReceiver& webhook, const std::string& alertname,
                                  const std::string& cluster) {
  return [&webhook, alertname, cluster]() -> std::optional<Clock::time_point> {
    const auto n = Notifications(webhook, alertname, cluster);
    if (n.empty()) return std::nullopt;
    return n.front().at;
  };
}

void Print(const std::string& title, const std::string& text) {
  std::cout << "---- prometheus: " << title << "\n" << text << std::flush;
}

}  // namespace

TEST_CASE("prometheus: with direct push disabled the rules alone page a real double primary",
          "[prometheus]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  TempDir tmp("sbd-prom");
  WebhookReceiver webhook;
  AlertmanagerServer am(tmp.path() + "/am", webhook.url(), "1s", "1s");
  Detector detector{"detector", FreeLoopbackPort(), nullptr};
  StartDetector(detector, tmp.path(), DetectorYaml(sandbox, {&a, &b}, {}));
  const std::string rules =
      RenderRules(SBD_SOURCE_DIR, detector.url() + "/runbooks", tmp.path() + "/rules");
  PrometheusServer prom(tmp.path() + "/prom", {detector.target()}, {am.url()}, {rules});
  WaitForHealthyScrapes(prom, 1);
  REQUIRE(Notifications(webhook, "SplitBrain", kCluster).empty());

  const auto t0 = Clock::now();
  b.Promote();
  Timeline timeline(t0);
  timeline.AddCondition("detector reports split_brain",
                        [&] { return DetectorSays(detector, "split_brain"); });
  timeline.AddCondition("Prometheus: SplitBrain firing",
                        [&] { return !RuleAlert(prom, SplitBrainLabels()).is_null(); });
  timeline.Add("webhook: SplitBrain notification (via the rules)",
               FirstNotification(webhook, "SplitBrain", kCluster));
  const bool all = timeline.WaitAll(seconds(30));
  Print("rules only, after promoting pg-b", timeline.Report());
  INFO(timeline.Report() << "prometheus log:\n"
                         << prom.LogTail() << "alertmanager log:\n"
                         << am.LogTail());
  REQUIRE(all);

  const auto notified = Notifications(webhook, "SplitBrain", kCluster);
  REQUIRE(notified.size() == 1);
  const Json& alert = notified.front().alert;
  INFO(alert.dump(2));
  // Exactly the label set the detector pushes: no job, no instance, no scope (plain PostgreSQL),
  // and the lock's kind, which the rules copy from splitbrain_cluster_info.
  CHECK(alert["labels"] == Json({{"alertname", "SplitBrain"},
                                 {"severity", "critical"},
                                 {"cluster", kCluster},
                                 {"lock_kind", "postgres"}}));
  CHECK(alert["annotations"].value("summary", "") ==
        "Split brain in demo: two or more members are writable at once");
  CHECK(
      alert["annotations"].value("description", "").find("pg-a (timeline 1), pg-b (timeline 2)") !=
      std::string::npos);
  CHECK(alert["annotations"].value("runbook_url", "") ==
        detector.url() + "/runbooks/split-brain.md");
  // It came from Prometheus: the detector has no alerting section and pushed nothing.
  CHECK(alert.value("generatorURL", "").rfind("http://", 0) == 0);
  CHECK(alert.value("generatorURL", "").find("/graph?g0.expr=") != std::string::npos);
  CHECK(SumOf(HttpGet(detector.port, "/metrics"), "splitbrain_alertmanager_pushes_total") == 0);
}

TEST_CASE("prometheus: with both paths on, Alertmanager sends one SplitBrain notification",
          "[prometheus]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  TempDir tmp("sbd-prom");
  WebhookReceiver webhook;
  AlertmanagerServer am(tmp.path() + "/am", webhook.url(), "1s", "1s");
  Detector detector{"detector", FreeLoopbackPort(), nullptr};
  StartDetector(detector, tmp.path(), DetectorYaml(sandbox, {&a, &b}, {am.url()}));
  const std::string rules =
      RenderRules(SBD_SOURCE_DIR, detector.url() + "/runbooks", tmp.path() + "/rules");
  PrometheusServer prom(tmp.path() + "/prom", {detector.target()}, {am.url()}, {rules});
  WaitForHealthyScrapes(prom, 1);
  REQUIRE(Notifications(webhook, "SplitBrain", kCluster).empty());
  const double prom_sent_before = PrometheusNotificationsSent(prom);
  const int am_received_before = LogLines(am, {"Received alert", "SplitBrain["});
  const int am_notified_before = LogLines(am, {"Notify success"});

  const auto t0 = Clock::now();
  b.Promote();
  Timeline timeline(t0);
  timeline.AddCondition("detector reports split_brain",
                        [&] { return DetectorSays(detector, "split_brain"); });
  timeline.AddCondition("detector path: pushed to Alertmanager", [&] {
    return SumOf(HttpGet(detector.port, "/metrics"), "splitbrain_alertmanager_alerts_sent_total") >=
           1;
  });
  timeline.AddCondition("Prometheus: SplitBrain firing",
                        [&] { return !RuleAlert(prom, SplitBrainLabels()).is_null(); });
  timeline.AddCondition("Prometheus path: notifier sent it to Alertmanager",
                        [&] { return PrometheusNotificationsSent(prom) > prom_sent_before; });
  timeline.Add("webhook: first SplitBrain notification",
               FirstNotification(webhook, "SplitBrain", kCluster));
  const bool all = timeline.WaitAll(seconds(30));
  INFO(timeline.Report() << "prometheus log:\n"
                         << prom.LogTail() << "alertmanager log:\n"
                         << am.LogTail() << "detector log:\n"
                         << detector.process->Log());
  REQUIRE(all);

  // Both paths have delivered. Give Alertmanager 3 more group intervals after the later of them
  // to send anything else it would send: a second notification arrives only if the two paths'
  // alerts differ in their label set. Returns early (and fails) if one does arrive.
  const auto quiet_until = timeline.Latest() + 3 * kGroupInterval;
  const bool second =
      WaitForNotifications(webhook, "SplitBrain", kCluster, 2,
                           std::chrono::duration_cast<milliseconds>(quiet_until - Clock::now()));
  const auto notified = Notifications(webhook, "SplitBrain", kCluster);

  std::ostringstream report;
  report << timeline.Report() << "  quiet until +" << Fixed(Since(t0, quiet_until)) << "s\n"
         << "  webhook deliveries in total (any alert): " << webhook.Deliveries().size() << "\n"
         << "  firing SplitBrain{cluster=demo} alerts notified: " << notified.size() << "\n";
  for (const auto& n : notified) report << "    " << Describe(n, t0) << "\n";
  const std::string det_metrics = HttpGet(detector.port, "/metrics");
  report << "  detector path: pushes=" << SumOf(det_metrics, "splitbrain_alertmanager_pushes_total")
         << " alerts_sent=" << SumOf(det_metrics, "splitbrain_alertmanager_alerts_sent_total")
         << " failures=" << SumOf(det_metrics, "splitbrain_alertmanager_push_failures_total")
         << "\n  Prometheus path: alerts sent since the promotion="
         << PrometheusNotificationsSent(prom) - prom_sent_before
         << " (rule activeAt=" << RuleAlert(prom, SplitBrainLabels()).value("activeAt", "")
         << ")\n  Alertmanager: 'Received alert SplitBrain' log lines since the promotion="
         << LogLines(am, {"Received alert", "SplitBrain["}) - am_received_before
         << ", notifications sent (Notify success) since the promotion="
         << LogLines(am, {"Notify success"}) - am_notified_before
         << ", active SplitBrain alerts=" << ActiveIn(am, "SplitBrain") << "\n"
         << "  the rule alert reached Alertmanager "
         << (timeline.At("Prometheus path: notifier sent it to Alertmanager") <
                     timeline.At("webhook: first SplitBrain notification")
                 ? "before"
                 : "after")
         << " the first notification was sent\n";
  const Json merged = ActiveAlert(am, "SplitBrain");
  if (!merged.is_null()) {
    report << "  Alertmanager's merged alert now (latest sender's annotations): startsAt="
           << merged.value("startsAt", "") << " endsAt=" << merged.value("endsAt", "")
           << " summary=" << merged["annotations"].value("summary", "")
           << " generatorURL=" << merged.value("generatorURL", "").substr(0, 60) << "\n";
  }
  Print("both paths, after promoting pg-b", report.str());
  INFO(report.str());
  CHECK_FALSE(second);
  CHECK(notified.size() == 1);
  CHECK(ActiveIn(am, "SplitBrain") == 1);  // one alert: the two paths' alerts were merged
  if (!notified.empty()) {
    const Json& alert = notified.front().alert;
    CHECK(alert["labels"] == Json({{"alertname", "SplitBrain"},
                                   {"severity", "critical"},
                                   {"cluster", kCluster},
                                   {"lock_kind", "postgres"}}));
    // Rendered with the detector's own runbook base: both paths link to the same page.
    CHECK(alert["annotations"].value("runbook_url", "") ==
          detector.url() + "/runbooks/split-brain.md");
  }
}

TEST_CASE(
    "prometheus: two detectors and two clustered Alertmanagers send one SplitBrain notification",
    "[prometheus]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  TempDir tmp("sbd-prom");
  WebhookReceiver webhook;
  AlertmanagerServer am1(tmp.path() + "/am1", webhook.url(), "1s", "1s", {}, true);
  AlertmanagerServer am2(tmp.path() + "/am2", webhook.url(), "1s", "1s", {am1.cluster_address()});
  // Alertmanager holds notifications back until its gossip has settled; wait for that here so
  // the fault below meets a working cluster.
  const bool settled = WaitFor([&] { return ClusterReady(am1, 2) && ClusterReady(am2, 2); },
                               seconds(60), milliseconds(200));
  INFO("am1 log:\n" << am1.LogTail() << "am2 log:\n" << am2.LogTail());
  REQUIRE(settled);

  // Two replicas of the detector with the same config (no external labels): identical alerts.
  Detector d1{"detector-1", FreeLoopbackPort(), nullptr};
  Detector d2{"detector-2", FreeLoopbackPort(), nullptr};
  const std::string yaml = DetectorYaml(sandbox, {&a, &b}, {am1.url(), am2.url()});
  StartDetector(d1, tmp.path(), yaml);
  StartDetector(d2, tmp.path(), yaml);
  const std::string rules =
      RenderRules(SBD_SOURCE_DIR, d1.url() + "/runbooks", tmp.path() + "/rules");
  PrometheusServer prom(tmp.path() + "/prom", {d1.target(), d2.target()}, {am1.url(), am2.url()},
                        {rules});
  WaitForHealthyScrapes(prom, 2);
  REQUIRE(Notifications(webhook, "SplitBrain", kCluster).empty());
  const double prom_sent_before = PrometheusNotificationsSent(prom);
  const int am1_flushes_before = LogLines(am1, {"flushing", "SplitBrain["});
  const int am2_flushes_before = LogLines(am2, {"flushing", "SplitBrain["});
  const int am1_notified_before = LogLines(am1, {"Notify success"});
  const int am2_notified_before = LogLines(am2, {"Notify success"});

  const auto t0 = Clock::now();
  b.Promote();
  Timeline timeline(t0);
  for (const Detector* d : {&d1, &d2}) {
    timeline.AddCondition(d->name + " reports split_brain",
                          [d] { return DetectorSays(*d, "split_brain"); });
    timeline.AddCondition(d->name + " pushed to both Alertmanagers", [d] {
      const std::string body = HttpGet(d->port, "/metrics");
      const auto sent = ValuesOf(body, "splitbrain_alertmanager_alerts_sent_total");
      return sent.size() == 2 && sent[0] >= 1 && sent[1] >= 1 &&
             SumOf(body, "splitbrain_alertmanager_push_failures_total") == 0;
    });
  }
  timeline.AddCondition("Prometheus: SplitBrain firing",
                        [&] { return !RuleAlert(prom, SplitBrainLabels()).is_null(); });
  timeline.AddCondition("Prometheus path: notifier sent it to both Alertmanagers",
                        [&] { return PrometheusNotificationsSent(prom) >= prom_sent_before + 2; });
  timeline.AddCondition("am1 holds SplitBrain active",
                        [&] { return ActiveIn(am1, "SplitBrain") == 1; });
  timeline.AddCondition("am2 holds SplitBrain active",
                        [&] { return ActiveIn(am2, "SplitBrain") == 1; });
  timeline.Add("webhook: first SplitBrain notification",
               FirstNotification(webhook, "SplitBrain", kCluster));
  const bool all = timeline.WaitAll(seconds(30));
  INFO(timeline.Report() << "prometheus log:\n"
                         << prom.LogTail() << "am1 log:\n"
                         << am1.LogTail() << "am2 log:\n"
                         << am2.LogTail());
  REQUIRE(all);

  // The second peer notifies kPeerTimeout after the first would have, unless the first one's
  // notification log entry reached it by gossip. Wait that out plus 3 group intervals after
  // everything above was seen; returns early (and fails) on a second notification.
  const auto quiet_until = timeline.Latest() + kGroupWait + kPeerTimeout + 3 * kGroupInterval;
  const bool second =
      WaitForNotifications(webhook, "SplitBrain", kCluster, 2,
                           std::chrono::duration_cast<milliseconds>(quiet_until - Clock::now()));
  const auto notified = Notifications(webhook, "SplitBrain", kCluster);

  std::ostringstream report;
  report << timeline.Report() << "  quiet until +" << Fixed(Since(t0, quiet_until)) << "s\n"
         << "  webhook deliveries in total (any alert): " << webhook.Deliveries().size() << "\n"
         << "  firing SplitBrain{cluster=demo} alerts notified: " << notified.size() << "\n";
  for (const auto& n : notified) report << "    " << Describe(n, t0) << "\n";
  report << "  Prometheus path: alerts sent since the promotion="
         << PrometheusNotificationsSent(prom) - prom_sent_before << "\n";
  for (const Detector* d : {&d1, &d2}) {
    const std::string body = HttpGet(d->port, "/metrics");
    report << "  " << d->name
           << " path: pushes=" << SumOf(body, "splitbrain_alertmanager_pushes_total")
           << " alerts_sent=" << SumOf(body, "splitbrain_alertmanager_alerts_sent_total") << "\n";
  }
  report << "  am1 flushes of the SplitBrain group: "
         << LogLines(am1, {"flushing", "SplitBrain["}) - am1_flushes_before
         << ", am2: " << LogLines(am2, {"flushing", "SplitBrain["}) - am2_flushes_before << "\n"
         << "  notifications sent (Notify success) since the promotion: am1 "
         << LogLines(am1, {"Notify success"}) - am1_notified_before << ", am2 "
         << LogLines(am2, {"Notify success"}) - am2_notified_before << "\n";
  Print("two detectors, two clustered Alertmanagers, after promoting pg-b", report.str());
  INFO(report.str() << "am1 log:\n" << am1.LogTail(60) << "am2 log:\n" << am2.LogTail(60));
  CHECK_FALSE(second);
  CHECK(notified.size() == 1);
  if (!notified.empty()) {
    CHECK(notified.front().alert["labels"] == Json({{"alertname", "SplitBrain"},
                                                    {"severity", "critical"},
                                                    {"cluster", kCluster},
                                                    {"lock_kind", "postgres"}}));
  }
}

TEST_CASE("prometheus: a killed detector fires SplitBrainDetectorDown through the rules",
          "[prometheus]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  TempDir tmp("sbd-prom");
  WebhookReceiver webhook;
  AlertmanagerServer am(tmp.path() + "/am", webhook.url(), "1s", "1s");
  Detector detector{"detector", FreeLoopbackPort(), nullptr};
  StartDetector(detector, tmp.path(), DetectorYaml(sandbox, {&a, &b}, {}));
  const std::string rules =
      RenderRules(SBD_SOURCE_DIR, detector.url() + "/runbooks", tmp.path() + "/rules");
  PrometheusServer prom(tmp.path() + "/prom", {detector.target()}, {am.url()}, {rules});
  WaitForHealthyScrapes(prom, 1);
  REQUIRE(Notifications(webhook, "SplitBrainDetectorDown", "").empty());

  // The rule's own `for:`, as loaded, decides how long this takes.
  const double for_seconds = prom.RuleForSeconds("SplitBrainDetectorDown");
  // Worst case after the kill: the next scrape starts within one scrape interval and fails
  // within the scrape timeout (<= interval), the next evaluation sees it within one evaluation
  // interval, then `for:`, then one more evaluation to fire, then group_wait; plus slack.
  const double scrape = 1, evaluation = 1, slack = 10;
  const double budget = 2 * scrape + for_seconds + 2 * evaluation +
                        std::chrono::duration<double>(kGroupWait).count() + slack;

  const auto t0 = Clock::now();
  detector.process->Kill();
  Timeline timeline(t0);
  timeline.AddCondition("Prometheus: up == 0", [&] {
    return ResultSize(prom, "up{job=\"splitbrain-detector\"} == 0") == 1;
  });
  const Json down = {{"alertname", "SplitBrainDetectorDown"}, {"instance", detector.target()}};
  timeline.AddCondition("Prometheus: SplitBrainDetectorDown pending", [&] {
    return !RuleAlert(prom, down, "pending").is_null() || !RuleAlert(prom, down).is_null();
  });
  timeline.AddCondition("Prometheus: SplitBrainDetectorDown firing",
                        [&] { return !RuleAlert(prom, down).is_null(); });
  timeline.Add("webhook: SplitBrainDetectorDown notification",
               FirstNotification(webhook, "SplitBrainDetectorDown", ""));
  const bool all = timeline.WaitAll(milliseconds(static_cast<int>(budget * 1000)));
  Print("detector SIGKILLed (rule for: " + Fixed(for_seconds) + "s, budget " + Fixed(budget) + "s)",
        timeline.Report());
  INFO(timeline.Report() << "prometheus log:\n"
                         << prom.LogTail() << "alertmanager log:\n"
                         << am.LogTail());
  REQUIRE(all);

  const auto notified = Notifications(webhook, "SplitBrainDetectorDown", "");
  REQUIRE(notified.size() == 1);
  const Json& alert = notified.front().alert;
  INFO(alert.dump(2));
  // `for:` was honoured: nothing before it elapsed.
  CHECK(Since(t0, notified.front().at) >= for_seconds);
  CHECK(alert["labels"] == Json({{"alertname", "SplitBrainDetectorDown"},
                                 {"severity", "critical"},
                                 {"job", "splitbrain-detector"},
                                 {"instance", detector.target()}}));
  CHECK(alert["annotations"].value("summary", "") ==
        "splitbrain-detector " + detector.target() + " is down: split brains go unreported");
  CHECK(alert["annotations"].value("runbook_url", "") ==
        detector.url() + "/runbooks/detector-down.md");
}

}  // namespace sbd
