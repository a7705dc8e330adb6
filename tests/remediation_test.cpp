// The opt-in remediation without servers: the gate's every condition, the remediator's bounds
// (one action per member per incident, the fleet cap, dry runs that never act) with the fence
// replaced by a recorder, and what the output makes of its records. The fence itself runs
// against real PostgreSQL in pg_fence_integration_test.cpp.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "detector/output/alerts.h"
#include "detector/output/metrics.h"
#include "detector/output/remediation_output.h"
#include "detector/remediation/gate.h"
#include "detector/remediation/remediator.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;

Observation Read(const std::string& member, bool writable) {
  Observation obs;
  obs.member = member;
  obs.window = ReadingWindow{WallClock::now(), SteadyClock::now(), SteadyClock::now()};
  PostgresReading r;
  r.in_recovery = !writable;
  r.read_only = false;
  r.system_identifier = "7000000000000000001";
  r.timeline = writable ? 2 : 1;
  obs.result = r;
  return obs;
}

Observation Fail(const std::string& member) {
  Observation obs;
  obs.member = member;
  obs.result = ProbeFailure{ProbeFailureReason::kTimeout, "test"};
  return obs;
}

ClusterSpec Spec(RemediationMode mode) {
  ClusterSpec spec;
  spec.name = "orders";
  spec.kind = "patroni";
  for (const char* name : {"a", "b", "c"}) {
    MemberSpec m;
    m.name = name;
    m.dsn = std::string("host=127.0.0.1 port=5432 user=splitbrain dbname=postgres");
    spec.members.push_back(m);
  }
  spec.remediation.mode = mode;
  spec.remediation.user = "splitbrain_fence";
  return spec;
}

// A confirmed split brain: a holds the lock, b is the zombie, c a replica; all read.
Assessment SplitBrain() {
  Assessment a;
  a.verdict = a.raw_verdict = Verdict::kSplitBrain;
  a.writable = {"a", "b"};
  a.zombies = {"b"};
  a.lock_readable = true;
  a.lock_holder = "a";
  return a;
}

std::vector<Observation> Round() { return {Read("a", true), Read("b", true), Read("c", false)}; }

GateDecision Decide(const ClusterSpec& spec, const Assessment& a,
                    const std::vector<Observation>& round, bool fork = false) {
  return DecideRemediation(GateInput{spec, a, round, fork});
}

}  // namespace

TEST_CASE("remediation gate: a confirmed split brain with a readable holder targets the zombie",
          "[remediation]") {
  const GateDecision d = Decide(Spec(RemediationMode::kFence), SplitBrain(), Round());
  CHECK(d.targets == std::vector<std::string>{"b"});
  CHECK(d.holder == "a");
  CHECK(d.hold.empty());
}

TEST_CASE("remediation gate: without the block nothing is targeted and nothing is said",
          "[remediation]") {
  const GateDecision d = Decide(Spec(RemediationMode::kOff), SplitBrain(), Round());
  CHECK(d.targets.empty());
  CHECK(d.hold.empty());
}

TEST_CASE("remediation gate: every missing condition holds it back, and says which",
          "[remediation]") {
  const ClusterSpec spec = Spec(RemediationMode::kFence);
  struct Case {
    const char* name;
    std::function<void(Assessment&, std::vector<Observation>&, bool&)> change;
    const char* hold;
  };
  const std::vector<Case> cases = {
      {"suspected", [](Assessment& a, auto&, bool&) { a.verdict = Verdict::kSuspected; },
       "suspected"},
      {"suppressed",
       [](Assessment& a, auto&, bool&) {
         a.verdict = Verdict::kSuppressed;
         a.suppressed_split_brain = true;
       },
       "declaration"},
      {"fenced by tokens", [](Assessment& a, auto&, bool&) { a.split_brain_fenced = true; },
       "fenced by its token"},
      {"token regressed",
       [](Assessment& a, auto&, bool&) { a.fencing_regressions = {"revision 7 after 9"}; },
       "went back"},
      {"fork", [](Assessment&, auto&, bool& fork) { fork = true; }, "fork"},
      {"store unreadable",
       [](Assessment& a, auto&, bool&) {
         a.lock_readable = false;
         a.lock_error = "timeout";
       },
       "not read this round: timeout"},
      {"no holder", [](Assessment& a, auto&, bool&) { a.lock_holder.clear(); }, "no holder"},
      {"holder unreadable", [](Assessment&, auto& round, bool&) { round[0] = Fail("a"); },
       "holder a was not read writable"},
      {"holder not writable", [](Assessment&, auto& round, bool&) { round[0] = Read("a", false); },
       "holder a was not read writable"},
      {"zombie unreadable", [](Assessment&, auto& round, bool&) { round[1] = Fail("b"); },
       "no zombie"},
      {"zombie is the holder (a store that names both)",
       [](Assessment& a, auto&, bool&) { a.zombies = {"a"}; }, "no zombie"},
      {"zombie fenced by its own guard", [](Assessment& a, auto&, bool&) { a.fenced = {"b"}; },
       "no zombie"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Assessment a = SplitBrain();
    std::vector<Observation> round = Round();
    bool fork = false;
    c.change(a, round, fork);
    const GateDecision d = Decide(spec, a, round, fork);
    CHECK(d.targets.empty());
    CHECK_THAT(d.hold, Catch::Contains(c.hold));
  }
}

TEST_CASE("remediation gate: healthy, unknown and drift are not findings to act on",
          "[remediation]") {
  for (Verdict v : {Verdict::kHealthy, Verdict::kUnknown, Verdict::kDrift, Verdict::kNoPrimary}) {
    Assessment a = SplitBrain();
    a.verdict = a.raw_verdict = v;
    const GateDecision d = Decide(Spec(RemediationMode::kFence), a, Round());
    CHECK(d.targets.empty());
    CHECK(d.hold.empty());
  }
}

namespace {

// The fence replaced by a recorder that answers `result`.
struct Recorder {
  std::mutex mu;
  std::vector<FenceTarget> calls;
  std::string result = "fenced";
  Remediator::FenceFn Fn() {
    return [this](const FenceTarget& t) {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back(t);
      return FenceOutcome{result, "writes refused", 2, result == "fenced",
                          result == "fenced" ? PostgresFenceUndo() : ""};
    };
  }
  size_t Calls() {
    std::lock_guard<std::mutex> lock(mu);
    return calls.size();
  }
};

bool WaitIdle(const Remediator& r) {
  const auto deadline = SteadyClock::now() + std::chrono::seconds(5);
  while (!r.Idle()) {
    if (SteadyClock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

RemediationRequest Request(const std::string& cluster, RemediationMode mode,
                           WallClock::time_point incident, std::vector<std::string> members) {
  ClusterSpec spec = Spec(mode);
  RemediationRequest req{cluster, "patroni", incident, spec.remediation, "a", {}, std::nullopt, {}};
  for (const MemberSpec& m : spec.members) {
    if (std::find(members.begin(), members.end(), m.name) != members.end()) {
      req.targets.push_back(m);
    }
  }
  return req;
}

}  // namespace

TEST_CASE("remediator: a dry run records what it would do and never fences", "[remediation]") {
  Recorder recorder;
  Remediator r(RemediationLimits{}, recorder.Fn());
  r.Note("orders", "patroni", RemediationMode::kDryRun, "");
  r.Request(Request("orders", RemediationMode::kDryRun, WallClock::now(), {"b"}), WallClock::now());
  REQUIRE(WaitIdle(r));
  CHECK(recorder.Calls() == 0);
  const RemediationView view = r.View("orders");
  REQUIRE(view.records.size() == 1);
  CHECK(view.records[0].result == "dry_run");
  CHECK_THAT(view.records[0].detail, Catch::Contains("would make b refuse writes"));
  CHECK(view.counts.at({"postgres_read_only", "dry_run"}) == 1);
  CHECK(view.counts.at({"postgres_read_only", "fenced"}) == 0);
}

TEST_CASE("remediator: a fence runs once per member per incident, as the fencing role",
          "[remediation]") {
  Recorder recorder;
  Remediator r(RemediationLimits{10, std::chrono::minutes(10)}, recorder.Fn());
  setenv("SBD_TEST_FENCE_PASSWORD", "fence-secret", 1);
  RemediationRequest req = Request("orders", RemediationMode::kFence, WallClock::now(), {"b"});
  req.spec.password_env = "SBD_TEST_FENCE_PASSWORD";
  r.Request(req, WallClock::now());
  r.Request(req, WallClock::now());  // the next round of the same incident
  REQUIRE(WaitIdle(r));
  REQUIRE(recorder.Calls() == 1);
  CHECK(recorder.calls[0].user == "splitbrain_fence");
  CHECK(recorder.calls[0].password == std::optional<std::string>("fence-secret"));
  CHECK(recorder.calls[0].spare_user == "splitbrain");
  CHECK_THAT(recorder.calls[0].dsn, Catch::Contains("port=5432"));
  const RemediationView view = r.View("orders");
  REQUIRE(view.records.size() == 1);
  CHECK(view.records[0].result == "fenced");
  CHECK(view.records[0].verified);
  CHECK(view.records[0].finished >= view.records[0].requested);

  req.incident += std::chrono::minutes(5);  // a new incident: the member may be fenced again
  r.Request(req, WallClock::now());
  REQUIRE(WaitIdle(r));
  CHECK(recorder.Calls() == 2);
  unsetenv("SBD_TEST_FENCE_PASSWORD");
}

TEST_CASE("remediator: a dry run does not keep a later fence from acting in the same incident",
          "[remediation]") {
  Recorder recorder;
  Remediator r(RemediationLimits{}, recorder.Fn());
  const auto incident = WallClock::now();
  r.Request(Request("orders", RemediationMode::kDryRun, incident, {"b"}), WallClock::now());
  r.Request(Request("orders", RemediationMode::kDryRun, incident, {"b"}), WallClock::now());
  r.Request(Request("orders", RemediationMode::kFence, incident, {"b"}), WallClock::now());
  REQUIRE(WaitIdle(r));
  CHECK(recorder.Calls() == 1);
  const RemediationView view = r.View("orders");
  REQUIRE(view.records.size() == 2);  // one dry run, said once; one fence
  CHECK(view.records[0].result == "dry_run");
  CHECK(view.records[1].result == "fenced");
}

TEST_CASE("remediator: the fleet cap fences N members, records the rest as capped",
          "[remediation]") {
  Recorder recorder;
  Remediator r(RemediationLimits{2, std::chrono::minutes(10)}, recorder.Fn());
  const auto now = WallClock::now();
  for (const char* cluster : {"c1", "c2", "c3"}) {
    r.Request(Request(cluster, RemediationMode::kFence, now, {"b"}), now);
  }
  REQUIRE(WaitIdle(r));
  CHECK(recorder.Calls() == 2);
  REQUIRE(r.View("c3").records.size() == 1);
  CHECK(r.View("c3").records[0].result == "capped");
  CHECK_THAT(r.View("c3").records[0].detail, Catch::Contains("cap of 2 fences per 10m"));
  // The window passed: the cap lets one more through.
  r.Request(Request("c4", RemediationMode::kFence, now, {"b"}), now + std::chrono::minutes(11));
  REQUIRE(WaitIdle(r));
  CHECK(recorder.Calls() == 3);
}

TEST_CASE("remediator: a Redis zombie is fenced at its address with the cluster's TLS",
          "[remediation]") {
  std::vector<RedisFenceTarget> calls;
  std::mutex mu;
  Recorder postgres;  // never called: the cluster is Redis
  Remediator r(RemediationLimits{}, postgres.Fn(), [&](const RedisFenceTarget& t) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(t);
    return FenceOutcome{"fenced", "NOREPLICAS", 0, true, "CONFIG SET min-replicas-to-write 0"};
  });
  MemberSpec zombie;
  zombie.name = "r1";
  zombie.address = "127.0.0.1:6380";
  RemediationSpec spec;
  spec.mode = RemediationMode::kFence;
  RedisTlsSpec tls;
  tls.ca_file = "/etc/ca.pem";
  r.Request(RemediationRequest{"cache", "redis", WallClock::now(), spec, "m", {zombie}, tls, {}},
            WallClock::now());
  REQUIRE(WaitIdle(r));
  CHECK(postgres.Calls() == 0);
  std::lock_guard<std::mutex> lock(mu);
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].address == "127.0.0.1:6380");
  CHECK(calls[0].username.empty());
  REQUIRE(calls[0].tls.has_value());
  CHECK(calls[0].tls->ca_file == "/etc/ca.pem");
  const RemediationView view = r.View("cache");
  REQUIRE(view.records.size() == 1);
  CHECK(view.records[0].action == "redis_write_guard");
  CHECK(view.records[0].undo == "CONFIG SET min-replicas-to-write 0");
}

TEST_CASE("remediator: an unreadable fencing password fails without connecting", "[remediation]") {
  Recorder recorder;
  Remediator r(RemediationLimits{}, recorder.Fn());
  RemediationRequest req = Request("orders", RemediationMode::kFence, WallClock::now(), {"b"});
  req.spec.password_file = "/nonexistent/fence-password";
  r.Request(req, WallClock::now());
  REQUIRE(WaitIdle(r));
  CHECK(recorder.Calls() == 0);
  REQUIRE(r.View("orders").records.size() == 1);
  CHECK(r.View("orders").records[0].result == "failed");
  CHECK_THAT(r.View("orders").records[0].detail, Catch::Contains("password"));
}

TEST_CASE("remediation output: counters, the page's words and ZombieFenced", "[remediation]") {
  Recorder recorder;
  Remediator r(RemediationLimits{}, recorder.Fn());
  ClusterSnapshot c;
  c.spec = Spec(RemediationMode::kFence);
  c.has_round = true;
  c.assessment = SplitBrain();
  c.split_brain_open = true;
  c.split_brain_opened_at = WallClock::now() - std::chrono::seconds(1);
  r.Note("orders", "patroni", RemediationMode::kFence, "");
  r.Request(Request("orders", RemediationMode::kFence, c.split_brain_opened_at, {"b"}),
            WallClock::now());
  REQUIRE(WaitIdle(r));
  c.remediation = r.View("orders");

  const std::string metrics =
      RenderMetrics(DetectorCollector([&] { return std::vector<ClusterSnapshot>{c}; }, nullptr));
  CHECK_THAT(metrics, Catch::Contains("splitbrain_remediations_total{cluster=\"orders\","
                                      "action=\"postgres_read_only\",result=\"fenced\"} 1"));
  CHECK_THAT(metrics, Catch::Contains("splitbrain_remediations_total{cluster=\"orders\","
                                      "action=\"postgres_read_only\",result=\"capped\"} 0"));
  CHECK_THAT(metrics,
             Catch::Contains("splitbrain_remediation_mode{cluster=\"orders\",mode=\"fence\"} 1"));

  AlertingSpec alerting;
  const std::vector<Alert> alerts = AlertsFor(c, alerting, AlertLinks{"http://d/status", "rb/"});
  const Alert* page = nullptr;
  const Alert* fenced = nullptr;
  for (const Alert& a : alerts) {
    if (a.labels.at("alertname") == "SplitBrain") page = &a;
    if (a.labels.at("alertname") == "ZombieFenced") fenced = &a;
  }
  REQUIRE(page != nullptr);
  CHECK_THAT(page->annotations.at("summary"), Catch::Contains("fenced b at"));
  CHECK_THAT(page->annotations.at("description"), Catch::Contains("Remediation:"));
  CHECK_THAT(page->annotations.at("description"),
             Catch::Contains("ALTER SYSTEM RESET default_transaction_read_only"));
  REQUIRE(fenced != nullptr);
  CHECK(fenced->labels.at("severity") == "warning");
  CHECK(fenced->annotations.at("runbook_url") == "rb/zombie-fenced.md");
  const nlohmann::json json = RemediationJson(c.remediation);
  CHECK(json["records"][0]["result"] == "fenced");
  CHECK(json["records"][0]["undo"] == PostgresFenceUndo());
  CHECK_THAT(fenced->annotations.at("summary"), Catch::Contains(PostgresFenceUndo()));
}

}  // namespace sbd

namespace sbd {

TEST_CASE("remediation config: the block, its defaults and the fleet cap", "[remediation]") {
  const ConfigResult result = ParseConfig(R"(remediation:
  max_fences: 3
  window: 30m
clusters:
  - name: orders
    kind: patroni
    scope: orders
    etcd:
      endpoints: [http://127.0.0.1:2379]
    remediation:
      mode: fence
      user: splitbrain_fence
      password_env: SBD_FENCE_PASSWORD
      timeout: 2s
    members:
      - name: pg1
        dsn: "host=127.0.0.1"
  - name: cache
    kind: redis
    redis:
      master_name: cache
      sentinels: ["127.0.0.1:26379"]
    remediation:
      mode: dry_run
    members:
      - name: r1
        address: "127.0.0.1:6379"
  - name: plain
    members:
      - name: pg1
        dsn: "host=127.0.0.1"
)",
                                          "remediation.yml");
  REQUIRE(std::holds_alternative<ValidatedConfig>(result));
  const ValidatedConfig& config = std::get<ValidatedConfig>(result);
  CHECK(config.remediation_limits().max_fences == 3);
  CHECK(config.remediation_limits().window == std::chrono::minutes(30));
  const RemediationSpec& orders = config.clusters()[0].remediation;
  CHECK(orders.mode == RemediationMode::kFence);
  CHECK(orders.user == "splitbrain_fence");
  CHECK(orders.password_env == std::optional<std::string>("SBD_FENCE_PASSWORD"));
  CHECK(orders.timeout == std::chrono::seconds(2));
  CHECK(config.clusters()[1].remediation.mode == RemediationMode::kDryRun);
  CHECK(config.clusters()[2].remediation.mode == RemediationMode::kOff);
  CHECK(RemediationAction("redis") == "redis_write_guard");
  CHECK(RemediationAction("k8s_lease") == "hook");
  CHECK(RemediationAction("etcd_election") == "hook");
  CHECK(RemediationAction("postgres") == "none");
  CHECK(RemediationAction("repmgr") == "postgres_read_only");
}

namespace {

constexpr const char* kElection = R"(clusters:
  - name: jobs
    kind: etcd_election
    etcd_election:
      endpoints: [http://127.0.0.1:2379]
      prefix: /election/jobs
    remediation:
REMEDIATION
    members:
      - name: a
        metrics_url: http://127.0.0.1:9101/metrics
      - name: b
        metrics_url: http://127.0.0.1:9102/metrics
)";

ConfigResult Election(const std::string& remediation) {
  std::string text = kElection;
  text.replace(text.find("REMEDIATION"), std::string("REMEDIATION").size(), remediation);
  return ParseConfig(text, "hook.yml");
}

std::string Errors(const ConfigResult& result) {
  std::string text;
  if (const auto* errors = std::get_if<std::vector<ConfigError>>(&result)) {
    for (const ConfigError& e : *errors) text += e.ToString() + "\n";
  }
  return text;
}

}  // namespace

TEST_CASE("remediation config: a lease kind fences through its hook, and only with one",
          "[remediation][hook]") {
  const ConfigResult ok = Election(
      "      mode: fence\n      timeout: 2s\n      hook:\n        url: https://ops.example/stop\n"
      "        token_file: /etc/splitbrain/hook-token\n        ca_file: /etc/ssl/ops-ca.pem");
  INFO(Errors(ok));
  REQUIRE(std::holds_alternative<ValidatedConfig>(ok));
  const RemediationSpec& spec = std::get<ValidatedConfig>(ok).clusters()[0].remediation;
  CHECK(spec.mode == RemediationMode::kFence);
  REQUIRE(spec.hook.has_value());
  CHECK(spec.hook->url == "https://ops.example/stop");
  CHECK(spec.hook->token_file == std::optional<std::string>("/etc/splitbrain/hook-token"));
  CHECK(spec.hook->ca_file == "/etc/ssl/ops-ca.pem");
  CHECK(std::holds_alternative<ValidatedConfig>(Election("      mode: dry_run")));

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"      mode: fence", "clusters[0].remediation.hook: required for mode: fence"},
      {"      mode: fence\n      hook:\n        url: ftp://ops/stop", "remediation.hook.url"},
      {"      mode: fence\n      hook:\n        url: https://user:pw@ops/stop",
       "may not carry credentials"},
      {"      mode: fence\n      hook:\n        token_env: T", "remediation.hook.url"},
      {"      mode: fence\n      hook:\n        url: http://ops/stop\n        token_file: /t\n"
       "        token_env: T",
       "only one of token_file and token_env"},
      {"      mode: fence\n      hook:\n        url: http://ops/stop\n        token_env: 1-x",
       "expected an environment variable name"},
      {"      mode: fence\n      hook:\n        url: http://ops/stop\n        method: GET",
       "remediation.hook.method"},
  };
  for (const auto& [block, expected] : bad) {
    CAPTURE(block);
    const ConfigResult result = Election(block);
    REQUIRE(std::holds_alternative<std::vector<ConfigError>>(result));
    CHECK_THAT(Errors(result), Catch::Contains(expected));
    CHECK_THAT(Errors(result), !Catch::Contains("pw@"));
  }
}

TEST_CASE("remediation config: a hook is refused where the detector fences itself",
          "[remediation][hook]") {
  const ConfigResult result = ParseConfig(R"(clusters:
  - name: cache
    kind: redis
    redis:
      master_name: cache
      sentinels: ["127.0.0.1:26379"]
    remediation:
      mode: fence
      hook:
        url: http://ops/stop
    members:
      - name: r1
        address: "127.0.0.1:6379"
)",
                                          "redis-hook.yml");
  REQUIRE(std::holds_alternative<std::vector<ConfigError>>(result));
  CHECK_THAT(Errors(result), Catch::Contains("clusters[0].remediation.hook: kind: redis is fenced "
                                             "by the detector itself"));
}

TEST_CASE("remediator: a lease zombie is handed to the hook with the round's evidence",
          "[remediation][hook]") {
  std::vector<HookFenceTarget> calls;
  std::mutex mu;
  Recorder postgres;  // never called: the cluster's members are processes
  Remediator r(RemediationLimits{}, postgres.Fn(), nullptr, [&](const HookFenceTarget& t) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(t);
    return FenceOutcome{"fenced", "the hook answered HTTP 200", 0, false, "start it again"};
  });
  MemberSpec zombie;
  zombie.name = "b";
  zombie.claim_url = "http://127.0.0.1:9102/metrics";
  RemediationSpec spec;
  spec.mode = RemediationMode::kFence;
  spec.timeout = milliseconds(1500);
  spec.hook = RemediationHookSpec{"http://127.0.0.1:9/stop", std::nullopt,
                                  std::string("SBD_TEST_HOOK_TOKEN"), ""};
  setenv("SBD_TEST_HOOK_TOKEN", "hook-token-1", 1);
  const auto incident = WallClock::now();
  RemediationRequest req{"jobs", "etcd_election", incident,     spec,
                         "a",    {zombie},        std::nullopt, {{"a", "57"}, {"b", "41"}}};
  r.Note("jobs", "etcd_election", RemediationMode::kFence, "");
  r.Request(req, WallClock::now());
  r.Request(req, WallClock::now());  // the same incident: asked once
  REQUIRE(WaitIdle(r));
  unsetenv("SBD_TEST_HOOK_TOKEN");
  CHECK(postgres.Calls() == 0);
  std::lock_guard<std::mutex> lock(mu);
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].url == "http://127.0.0.1:9/stop");
  CHECK(calls[0].token == std::optional<std::string>("hook-token-1"));
  CHECK(calls[0].timeout == milliseconds(1500));
  const nlohmann::json sent = nlohmann::json::parse(calls[0].body);
  CHECK(sent["cluster"] == "jobs");
  CHECK(sent["zombie"]["name"] == "b");
  CHECK(sent["zombie"]["token"] == "41");
  CHECK(sent["zombie"]["claim_url"] == "http://127.0.0.1:9102/metrics");
  CHECK(sent["holder"]["name"] == "a");
  CHECK(sent["holder"]["token"] == "57");
  const RemediationView view = r.View("jobs");
  REQUIRE(view.records.size() == 1);
  CHECK(view.action == "hook");
  CHECK(view.records[0].action == "hook");
  CHECK(view.records[0].result == "fenced");
  CHECK_FALSE(view.records[0].verified);
  CHECK(view.records[0].undo == "start it again");
  CHECK(view.counts.at({"hook", "fenced"}) == 1);
}

TEST_CASE("remediator: a hook whose token cannot be read is not called", "[remediation][hook]") {
  int called = 0;
  Remediator r(RemediationLimits{}, nullptr, nullptr, [&](const HookFenceTarget&) {
    ++called;
    return FenceOutcome{"fenced", "", 0, false, ""};
  });
  MemberSpec zombie;
  zombie.name = "b";
  RemediationSpec spec;
  spec.mode = RemediationMode::kFence;
  spec.hook = RemediationHookSpec{"http://127.0.0.1:9/stop", std::string("/nonexistent/token"),
                                  std::nullopt, ""};
  r.Request(
      RemediationRequest{
          "jobs", "k8s_lease", WallClock::now(), spec, "a", {zombie}, std::nullopt, {}},
      WallClock::now());
  REQUIRE(WaitIdle(r));
  CHECK(called == 0);
  REQUIRE(r.View("jobs").records.size() == 1);
  CHECK(r.View("jobs").records[0].result == "failed");
  CHECK_THAT(r.View("jobs").records[0].detail,
             Catch::Contains("the hook's token: cannot read token_file /nonexistent/token"));
}

TEST_CASE("remediation gate: the targets' and the holder's tokens go with the decision",
          "[remediation][hook]") {
  ClusterSpec spec;
  spec.name = "jobs";
  spec.kind = "etcd_election";
  spec.remediation.mode = RemediationMode::kDryRun;
  const auto claim = [](const std::string& member, const std::string& token, bool holds) {
    Observation obs;
    obs.member = member;
    obs.window = ReadingWindow{WallClock::now(), SteadyClock::now(), SteadyClock::now()};
    LockClaimReading reading;
    reading.claims = holds;
    reading.token = token;
    obs.result = reading;
    return obs;
  };
  const std::vector<Observation> round = {claim("a", "57", true), claim("b", "41", true),
                                          claim("c", "", false)};
  const GateDecision d = Decide(spec, SplitBrain(), round);
  REQUIRE(d.targets == std::vector<std::string>{"b"});
  CHECK(d.tokens == std::map<std::string, std::string>{{"a", "57"}, {"b", "41"}});
}

}  // namespace sbd
