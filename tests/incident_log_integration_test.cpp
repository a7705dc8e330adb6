// The incident log through the real detector binary against real PostgreSQL 15: a split brain
// shows up in GET /api/v1/incidents, survives a restart through the file, and `check` lists it.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/detector_process.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace {

using sbd::testing::DetectorProcess;
using sbd::testing::HttpGet;
using sbd::testing::PgInstance;
using sbd::testing::PgSandbox;
using sbd::testing::RunCommand;
using sbd::testing::WaitFor;
using sbd::testing::WriteFile;
using std::chrono::seconds;

std::string Config(const PgSandbox& sandbox, const std::vector<const PgInstance*>& members,
                   const std::string& log_file) {
  // Reads get 2 s: the case counts what the log lists, so a read that times out under
  // AddressSanitizer on a loaded machine (CI: both members at once, 400 ms) would list a
  // change that the case is not about.
  std::ostringstream out;
  out << "incident_log:\n  file: " << log_file << "\n  retention: 1h\n  max_events: 1000\n"
      << "clusters:\n  - name: demo\n    ttl: 6s\n    probe_interval: 2s\n"
      << "    probe_timeout: 2s\n    members:\n";
  for (const PgInstance* m : members) {
    out << "      - name: " << m->name() << "\n        dsn: \"" << m->MonitorDsn()
        << "\"\n        password_file: " << sandbox.PasswordFile() << "\n";
  }
  return out.str();
}

// The events of `demo` the detector on `port` lists, newest first (empty when unreachable).
nlohmann::json Events(int port) {
  const nlohmann::json answer =
      nlohmann::json::parse(HttpGet(port, "/api/v1/incidents?cluster=demo"), nullptr, false);
  return answer.is_object() ? answer["events"] : nlohmann::json::array();
}

// The event recording the change to split_brain, or null.
nlohmann::json SplitBrainChange(const nlohmann::json& events) {
  for (const auto& e : events) {
    if (e["kind"] == "verdict_changed" && e["fields"]["to"] == "split_brain") return e;
  }
  return nullptr;
}

size_t CountKind(const nlohmann::json& events, const std::string& kind) {
  size_t n = 0;
  for (const auto& e : events) n += e["kind"] == kind ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("incident log: a split brain is listed, and still listed after a restart",
          "[postgres][incidents]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  const std::string log_file = sandbox.root() + "/incidents.jsonl";
  const std::string config =
      WriteFile(sandbox.root(), "detector.yml", Config(sandbox, {&a, &b}, log_file));
  auto start = [&](int port) {
    return std::make_unique<DetectorProcess>(
        SBD_BINARY,
        std::vector<std::string>{"--config.file=" + config,
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port)},
        sandbox.root() + "/detector.log");
  };
  int port = sbd::testing::FreeLoopbackPort();
  auto detector = start(port);
  REQUIRE(WaitFor([&] { return HttpGet(port, "/-/ready") == "Ready\n"; }, seconds(15)));
  REQUIRE(WaitFor([&] { return CountKind(Events(port), "cluster_added") == 1; }, seconds(5)));

  b.Promote();
  REQUIRE(WaitFor([&] { return !SplitBrainChange(Events(port)).is_null(); }, seconds(20)));
  const nlohmann::json change = SplitBrainChange(Events(port));
  INFO(change.dump());
  CHECK(change["cluster"] == "demo");
  CHECK(change["fields"]["from"] == "healthy");
  CHECK(change["fields"]["writable"] == nlohmann::json({"pg-a", "pg-b"}));

  // Killed, not stopped: what was listed had already reached the file.
  detector->Kill();
  port = sbd::testing::FreeLoopbackPort();
  detector = start(port);
  REQUIRE(WaitFor([&] { return HttpGet(port, "/-/ready") == "Ready\n"; }, seconds(15)));
  const nlohmann::json after = Events(port);
  INFO(after.dump());
  CHECK(SplitBrainChange(after) == change);
  // The file also carried the state over: the same split brain is not recorded again.
  CHECK(CountKind(after, "cluster_added") == 1);
  CHECK(CountKind(after, "verdict_changed") == 1);
  CHECK(HttpGet(port, "/api/v1/incidents?limit=0").empty());  // 400: refused with a reason
  detector->Kill();

  const auto check =
      RunCommand({SBD_BINARY, "check", "--config.file=" + config}, false, seconds(60));
  INFO(check.output);
  CHECK(check.exit_code == 7);
  CHECK(check.output.find("verdict_changed  healthy -> split_brain") != std::string::npos);
  CHECK(check.output.find(PgSandbox::kMonitorPassword) == std::string::npos);
}
