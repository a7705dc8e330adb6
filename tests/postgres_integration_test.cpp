// Integration tests against real PostgreSQL 15 servers started by tests/support/pg_sandbox.
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "detector/config/config.h"
#include "detector/engine/scheduler.h"
#include "tests/support/detector_process.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace sbd {
namespace {

using sbd::testing::DetectorProcess;
using sbd::testing::HasLine;
using sbd::testing::HttpGet;
using sbd::testing::MetricValue;
using sbd::testing::PgInstance;
using sbd::testing::PgSandbox;
using sbd::testing::RunCommand;
using sbd::testing::WaitFor;
using sbd::testing::WriteFile;
using std::chrono::milliseconds;
using std::chrono::seconds;

struct ClusterYaml {
  std::string name;
  std::vector<const PgInstance*> members;
  std::string ttl = "3s";
  std::string interval = "500ms";
  std::string timeout = "400ms";
};

std::string ConfigYaml(const PgSandbox& sandbox, const std::vector<ClusterYaml>& clusters) {
  std::ostringstream out;
  out << "clusters:\n";
  for (const auto& c : clusters) {
    out << "  - name: " << c.name << "\n    ttl: " << c.ttl
        << "\n    probe_interval: " << c.interval << "\n    probe_timeout: " << c.timeout
        << "\n    members:\n";
    for (const PgInstance* m : c.members) {
      out << "      - name: " << m->name() << "\n        dsn: \"" << m->MonitorDsn()
          << "\"\n        password_file: " << sandbox.PasswordFile() << "\n";
    }
  }
  return out.str();
}

ValidatedConfig MustParse(const std::string& yaml) {
  ConfigResult result = ParseConfig(yaml, "test.yml");
  if (auto* errors = std::get_if<std::vector<ConfigError>>(&result)) {
    FAIL("config rejected: " << errors->front().ToString());
  }
  return std::get<ValidatedConfig>(std::move(result));
}

const ClusterSnapshot& Find(const std::vector<ClusterSnapshot>& all, const std::string& name) {
  for (const auto& c : all) {
    if (c.spec.name == name) return c;
  }
  throw std::runtime_error("no cluster " + name);
}

const PostgresReading& LastReading(const ClusterSnapshot& c, const std::string& member) {
  return *c.history.members.at(member).last_reading;
}

Verdict VerdictOf(const Scheduler& s, const std::string& cluster) {
  return Find(s.Snapshot(), cluster).assessment.verdict;
}

}  // namespace

TEST_CASE("postgres: a healthy primary and replica are read by identity", "[postgres]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  // One round is all each case runs: a first connection (SCRAM) gets 2 s, which a sanitizer
  // build beside other suites needs; the 400 ms default is for later rounds.
  Scheduler scheduler(MustParse(ConfigYaml(sandbox, {{"demo", {&a, &b}, "6s", "2s", "2s"}})));
  scheduler.RunOnce();
  const ClusterSnapshot c = scheduler.Snapshot().front();
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict == Verdict::kHealthy);
  CHECK(c.assessment.writable == std::vector<std::string>{"pg-a"});
  const auto& ra = LastReading(c, "pg-a");
  const auto& rb = LastReading(c, "pg-b");
  CHECK(ra.writable());
  CHECK_FALSE(rb.writable());
  CHECK(rb.in_recovery);
  CHECK(ra.system_identifier == a.Query("SELECT system_identifier FROM pg_control_system()"));
  CHECK(ra.system_identifier == rb.system_identifier);
  CHECK(ra.timeline == 1);
  CHECK(rb.timeline == 1);
  CHECK(ra.server_version >= 150000);
  CHECK_FALSE(ra.wal_lsn.empty());
  CHECK(ra.wal_bytes > 0);
  CHECK_FALSE(ra.postmaster_start.empty());
  // The probe keeps one named session per member, and it is read-only.
  CHECK(a.Query("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                "'splitbrain-detector' AND usename = 'splitbrain'") == "1");
}

TEST_CASE("postgres: a promoted replica is a confirmed split brain naming both members",
          "[postgres]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  // One round is all each case runs: a first connection (SCRAM) gets 2 s, which a sanitizer
  // build beside other suites needs; the 400 ms default is for later rounds.
  Scheduler scheduler(MustParse(ConfigYaml(sandbox, {{"demo", {&a, &b}, "6s", "2s", "2s"}})));
  scheduler.RunOnce();
  REQUIRE(VerdictOf(scheduler, "demo") == Verdict::kHealthy);

  b.Promote();
  scheduler.RunOnce();
  const ClusterSnapshot c = scheduler.Snapshot().front();
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict == Verdict::kSplitBrain);
  CHECK(c.assessment.writable == std::vector<std::string>{"pg-a", "pg-b"});
  CHECK(c.confirmations_accepted == 1);
  CHECK(LastReading(c, "pg-a").system_identifier == LastReading(c, "pg-b").system_identifier);
  CHECK(c.assessment.lineage == LastReading(c, "pg-a").system_identifier);
  CHECK(LastReading(c, "pg-a").timeline == 1);
  CHECK(LastReading(c, "pg-b").timeline == 2);
  CHECK(c.history.members.at("pg-b").writable_since.has_value());
  CHECK(c.history.members.at("pg-a").writable_since <= c.history.members.at("pg-b").writable_since);
}

TEST_CASE("postgres: a separately initdb'd instance inside the cluster is drift, not split brain",
          "[postgres]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  PgInstance& stranger = sandbox.StartPrimary("pg-new");
  // One round decides, and timing is not what is tested: a first connection (SCRAM) to three
  // servers at once under a sanitizer on a loaded machine can outlast 400 ms.
  Scheduler scheduler(
      MustParse(ConfigYaml(sandbox, {{"demo", {&a, &b, &stranger}, "6s", "2s", "2s"}})));
  scheduler.RunOnce();
  const ClusterSnapshot c = scheduler.Snapshot().front();
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict == Verdict::kDrift);
  CHECK(c.assessment.writable == std::vector<std::string>{"pg-a"});
  CHECK(c.assessment.drift == std::vector<std::string>{"pg-new"});
  CHECK(c.assessment.lineage == LastReading(c, "pg-a").system_identifier);
  CHECK(LastReading(c, "pg-new").system_identifier != c.assessment.lineage);
  CHECK(c.confirmations_accepted + c.confirmations_rejected == 0);
  CHECK(c.assessment.writable_per_lineage.size() == 2);
}

TEST_CASE(
    "postgres: a frozen member turns unknown within its deadline and other clusters keep "
    "their cadence",
    "[postgres]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("a-1");
  PgInstance& a2 = sandbox.StartReplica("a-2", a);
  PgInstance& b = sandbox.StartPrimary("b-1");
  // interval 500ms, timeout 400ms for both clusters.
  Scheduler scheduler(MustParse(ConfigYaml(sandbox, {{"alpha", {&a, &a2}}, {"beta", {&b}}})));
  std::mutex mu;
  std::map<std::string, std::vector<SteadyClock::time_point>> round_ends;
  std::map<std::string, std::vector<double>> round_seconds;
  scheduler.SetRoundListener([&](const ClusterSnapshot& c) {
    std::lock_guard<std::mutex> lock(mu);
    round_ends[c.spec.name].push_back(SteadyClock::now());
    round_seconds[c.spec.name].push_back(c.last_round_seconds);
  });
  scheduler.Start();
  REQUIRE(WaitFor(
      [&] {
        return VerdictOf(scheduler, "alpha") == Verdict::kHealthy &&
               VerdictOf(scheduler, "beta") == Verdict::kHealthy;
      },
      seconds(10)));

  a2.Freeze();
  const auto frozen_at = SteadyClock::now();
  size_t beta_rounds_at_freeze;
  {
    std::lock_guard<std::mutex> lock(mu);
    beta_rounds_at_freeze = round_ends["beta"].size();
  }
  auto a2_unknown = [&] {
    const auto c = Find(scheduler.Snapshot(), "alpha");
    const auto& h = c.history.members.at("a-2");
    return h.last && !h.last->ok() && h.last->window.sent >= frozen_at;
  };
  REQUIRE(WaitFor(a2_unknown, seconds(5), milliseconds(10)));
  const double to_unknown = std::chrono::duration<double>(SteadyClock::now() - frozen_at).count();
  // At worst: wait for the next round (interval) plus the deadline, plus scheduling slack.
  CHECK(to_unknown < 0.5 + 0.4 + 0.3);
  {
    const auto c = Find(scheduler.Snapshot(), "alpha");
    CHECK(c.history.members.at("a-2").last->failure()->reason == ProbeFailureReason::kTimeout);
    CHECK(c.assessment.verdict == Verdict::kUnknown);
    CHECK(c.assessment.unreadable == std::vector<std::string>{"a-2"});
  }

  // Keep it frozen for six more alpha intervals, then look at both clusters' rounds.
  const auto observe_until = SteadyClock::now() + seconds(3);
  WaitFor([&] { return SteadyClock::now() >= observe_until; }, seconds(4));
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto& beta = round_ends["beta"];
    REQUIRE(beta.size() >= beta_rounds_at_freeze + 6);
    double worst_gap = 0;
    for (size_t i = beta_rounds_at_freeze; i < beta.size(); ++i) {
      worst_gap = std::max(worst_gap, std::chrono::duration<double>(beta[i] - beta[i - 1]).count());
    }
    INFO("beta's widest gap between rounds while alpha had a frozen member: " << worst_gap);
    CHECK(worst_gap < 0.5 + 0.15);
    double alpha_longest = 0;
    for (double s : round_seconds["alpha"]) alpha_longest = std::max(alpha_longest, s);
    INFO("alpha's longest round: " << alpha_longest);
    CHECK(alpha_longest < 0.4 + 0.25);
  }
  CHECK(VerdictOf(scheduler, "alpha") == Verdict::kUnknown);
  CHECK(VerdictOf(scheduler, "beta") == Verdict::kHealthy);

  a2.Thaw();
  CHECK(WaitFor([&] { return VerdictOf(scheduler, "alpha") == Verdict::kHealthy; }, seconds(15)));
  scheduler.Stop();
}

TEST_CASE("postgres: the check command's exit codes follow the worst verdict", "[postgres]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  PgInstance& stranger = sandbox.StartPrimary("pg-new");
  // Each check is one round of a freshly started binary: 2 s for its first connections, as
  // timing is not what is tested here.
  const std::string healthy = WriteFile(
      sandbox.root(), "healthy.yml", ConfigYaml(sandbox, {{"demo", {&a, &b}, "6s", "2s", "2s"}}));
  const std::string drift =
      WriteFile(sandbox.root(), "drift.yml",
                ConfigYaml(sandbox, {{"demo", {&a, &b, &stranger}, "6s", "2s", "2s"}}));
  const std::string unreachable = WriteFile(
      sandbox.root(), "unreachable.yml",
      ConfigYaml(sandbox, {{"demo", {&a, &b}, "6s", "2s", "2s"}}) +
          "  - name: gone\n    members:\n      - name: nobody\n        dsn: \"host=127.0.0.1 "
          "port=" +
          std::to_string(sbd::testing::FreeLoopbackPort()) +
          " user=splitbrain dbname=postgres connect_timeout=2\"\n");
  const std::string broken = WriteFile(sandbox.root(), "broken.yml", "clusters:\n  - nme: x\n");
  auto check = [](const std::string& config) {
    return RunCommand({SBD_BINARY, "check", "--config.file=" + config}, false, seconds(60));
  };

  auto result = check(healthy);
  INFO(result.output);
  CHECK(result.exit_code == 0);
  CHECK(result.output.find("Verdict: healthy") != std::string::npos);
  CHECK(result.output.find("pg-a") != std::string::npos);

  CHECK(check(drift).exit_code == 5);
  auto gone = check(unreachable);
  INFO(gone.output);
  CHECK(gone.exit_code == 3);
  CHECK(gone.output.find("refused") != std::string::npos);
  auto bad = check(broken);
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find(broken + ":2:5: clusters[0].nme: unknown key") != std::string::npos);

  b.Promote();
  auto split = check(healthy);
  INFO(split.output);
  CHECK(split.exit_code == 7);
  CHECK(split.output.find("Verdict: split_brain") != std::string::npos);
  CHECK(split.output.find(PgSandbox::kMonitorPassword) == std::string::npos);
}

TEST_CASE("postgres: /metrics follows the verdict, drops departed members and leaks no secret",
          "[postgres]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  // pg-b carries its password inline: it must still never show up anywhere.
  std::string yaml = ConfigYaml(sandbox, {{"demo", {&a, &b}}});
  const std::string b_line =
      "dsn: \"" + b.MonitorDsn() + "\"\n        password_file: " + sandbox.PasswordFile();
  yaml.replace(yaml.find(b_line), b_line.size(),
               "dsn: \"" + b.MonitorDsn() + " password=" + PgSandbox::kMonitorPassword + "\"");
  const std::string config = WriteFile(sandbox.root(), "detector.yml", yaml);
  const int port = sbd::testing::FreeLoopbackPort();
  DetectorProcess detector(
      SBD_BINARY,
      {"--config.file=" + config, "--web.listen-address=127.0.0.1:" + std::to_string(port)},
      sandbox.root() + "/detector.log");
  REQUIRE(WaitFor([&] { return HttpGet(port, "/-/ready") == "Ready\n"; }, seconds(15)));
  CHECK(HttpGet(port, "/-/healthy") == "Healthy\n");

  std::string metrics = HttpGet(port, "/metrics");
  INFO(metrics);
  CHECK(HasLine(metrics, "splitbrain_cluster_verdict{cluster=\"demo\",verdict=\"healthy\"} 1"));
  CHECK(HasLine(metrics, "splitbrain_cluster_verdict{cluster=\"demo\",verdict=\"split_brain\"} 0"));
  CHECK(HasLine(metrics, "splitbrain_member_writable{cluster=\"demo\",member=\"pg-a\"} 1"));
  CHECK(HasLine(metrics, "splitbrain_member_writable{cluster=\"demo\",member=\"pg-b\"} 0"));
  CHECK(HasLine(metrics, "splitbrain_member_up{cluster=\"demo\",member=\"pg-b\"} 1"));
  CHECK(HasLine(metrics, "splitbrain_member_timeline{cluster=\"demo\",member=\"pg-a\"} 1"));
  CHECK(HasLine(metrics, "splitbrain_config_last_reload_successful 1"));
  CHECK(metrics.find("splitbrain_build_info{") != std::string::npos);
  CHECK(metrics.find("splitbrain_round_last_timestamp_seconds{cluster=\"demo\"}") !=
        std::string::npos);

  // promtool, the Prometheus project's own linter, accepts the exposition.
  const std::string metrics_file = WriteFile(sandbox.root(), "metrics.txt", metrics);
  auto lint = RunCommand({"sh", "-c", "promtool check metrics < " + metrics_file});
  INFO(lint.output);
  CHECK(lint.exit_code == 0);
  // Every metric the shipped rules and dashboard use is in this real exposition.
  auto dashboards = RunCommand({SBD_SOURCE_DIR "/tests/check-dashboards", metrics_file});
  INFO(dashboards.output);
  CHECK(dashboards.exit_code == 0);

  b.Promote();
  const std::string sysid = a.Query("SELECT system_identifier FROM pg_control_system()");
  REQUIRE(WaitFor(
      [&] {
        return HasLine(HttpGet(port, "/metrics"),
                       "splitbrain_cluster_verdict{cluster=\"demo\",verdict=\"split_brain\"} 1");
      },
      seconds(10)));
  metrics = HttpGet(port, "/metrics");
  CHECK(
      HasLine(metrics, "splitbrain_cluster_writable_members{cluster=\"demo\",system_identifier=\"" +
                           sysid + "\"} 2"));
  CHECK(HasLine(metrics, "splitbrain_member_timeline{cluster=\"demo\",member=\"pg-b\"} 2"));
  CHECK(MetricValue(metrics,
                    "splitbrain_confirmations_total{cluster=\"demo\",result=\"confirmed\"}") >= 1);
  auto status = nlohmann::json::parse(HttpGet(port, "/status"));
  CHECK(status["clusters"][0]["verdict"] == "split_brain");
  CHECK(status["clusters"][0]["members"][1]["timeline"] == 2);

  // A broken reload keeps the last good config and says so.
  WriteFile(sandbox.root(), "detector.yml", "clusters: [\n");
  detector.Signal(SIGHUP);
  REQUIRE(WaitFor(
      [&] {
        return HasLine(HttpGet(port, "/metrics"), "splitbrain_config_last_reload_successful 0");
      },
      seconds(10)));
  CHECK(HttpGet(port, "/metrics").find("member=\"pg-b\"") != std::string::npos);

  // A good reload without pg-b: its series disappear.
  WriteFile(sandbox.root(), "detector.yml", ConfigYaml(sandbox, {{"demo", {&a}}}));
  detector.Signal(SIGHUP);
  REQUIRE(WaitFor(
      [&] {
        const std::string body = HttpGet(port, "/metrics");
        return HasLine(body, "splitbrain_config_last_reload_successful 1") &&
               body.find("member=\"pg-b\"") == std::string::npos &&
               HasLine(body, "splitbrain_cluster_verdict{cluster=\"demo\",verdict=\"healthy\"} 1");
      },
      seconds(10)));

  for (const std::string& body : {HttpGet(port, "/metrics"), HttpGet(port, "/status"),
                                  HttpGet(port, "/status?format=text"), detector.Log()}) {
    CHECK(body.find(PgSandbox::kMonitorPassword) == std::string::npos);
  }
}

}  // namespace sbd
