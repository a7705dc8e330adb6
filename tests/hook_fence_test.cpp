// The hook fence against real HTTP servers on loopback (cpp-httplib for the operator's hook,
// the hostile listeners for one that stalls): what it sends, what it makes of each answer, its
// bound, and that the token shows nowhere but in the request's header.
#include "detector/remediation/hook_fence.h"

#include <httplib.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/hostile_http.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

using sbd::testing::Hostility;
using std::chrono::milliseconds;

/// The operator's hook: answers every POST to /stop with `status` and `body`, and keeps what
/// it was sent.
class Hook {
 public:
  Hook(int status, std::string body) {
    server_.Post("/stop",
                 [this, status, body](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard<std::mutex> lock(mu_);
                   bodies_.push_back(req.body);
                   authorizations_.push_back(req.get_header_value("Authorization"));
                   res.status = status;
                   res.set_content(body, "application/json");
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // listen_after_bind() accepts from the bound socket's backlog: a request sent before it
    // runs waits there, so there is nothing to wait for here.
  }
  ~Hook() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/stop"; }
  std::vector<std::string> Bodies() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::vector<std::string> Authorizations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return authorizations_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::string> bodies_;
  std::vector<std::string> authorizations_;
};

HookEvidence Evidence() {
  HookEvidence e;
  e.cluster = "orders";
  e.kind = "etcd_election";
  e.zombie = "worker-b";
  e.zombie_token = "41";
  e.zombie_address = "http://127.0.0.1:9101/metrics";
  e.holder = "worker-a";
  e.holder_token = "57";
  e.incident_opened = WallClock::time_point(std::chrono::seconds(1796300000));
  e.requested = e.incident_opened + std::chrono::seconds(2);
  return e;
}

HookFenceTarget Target(const std::string& url, milliseconds timeout = milliseconds(2000)) {
  return HookFenceTarget{url, std::string("hook-secret-7f3a"), "", HookEvidenceJson(Evidence()),
                         timeout};
}

}  // namespace

TEST_CASE("hook fence: a 2xx posts the evidence with the token, unverified, with the hook's undo",
          "[remediation][hook]") {
  Hook hook(200, R"({"undo":"systemctl start orders-worker@b"})");
  const FenceOutcome outcome = FenceByHook(Target(hook.url()));
  CHECK(outcome.result == "fenced");
  CHECK_FALSE(outcome.verified);  // a process stopping is not seen from here
  CHECK(outcome.undo == "systemctl start orders-worker@b");
  CHECK_THAT(outcome.detail, Catch::Contains(hook.url() + ": the hook answered HTTP 200"));
  CHECK_THAT(outcome.detail, Catch::Contains("not verified"));
  REQUIRE(hook.Bodies().size() == 1);
  CHECK(hook.Authorizations()[0] == "Bearer hook-secret-7f3a");
  const nlohmann::json sent = nlohmann::json::parse(hook.Bodies()[0]);
  CHECK(sent["version"] == 1);
  CHECK(sent["action"] == "stop");
  CHECK(sent["cluster"] == "orders");
  CHECK(sent["kind"] == "etcd_election");
  CHECK(sent["zombie"]["name"] == "worker-b");
  CHECK(sent["zombie"]["token"] == "41");
  CHECK(sent["zombie"]["claim_url"] == "http://127.0.0.1:9101/metrics");
  CHECK(sent["holder"]["name"] == "worker-a");
  CHECK(sent["holder"]["token"] == "57");
  CHECK(sent["incident_opened"] == "2026-12-03T12:13:20Z");
  CHECK(sent["requested"] == "2026-12-03T12:13:22Z");
}

TEST_CASE("hook fence: an answer that is not a short printable undo is no undo",
          "[remediation][hook]") {
  for (const std::string& body : {std::string("not json"), std::string(R"({"undo":42})"),
                                  std::string(R"({"undo":"line\nbreak"})"),
                                  R"({"undo":")" + std::string(300, 'x') + R"("})"}) {
    CAPTURE(body);
    Hook hook(202, body);
    const FenceOutcome outcome = FenceByHook(Target(hook.url()));
    CHECK(outcome.result == "fenced");
    CHECK(outcome.undo.empty());
  }
}

TEST_CASE("hook fence: any other status fails and claims nothing", "[remediation][hook]") {
  for (int status : {301, 401, 404, 500, 503}) {
    CAPTURE(status);
    Hook hook(status, R"({"undo":"x"})");
    const FenceOutcome outcome = FenceByHook(Target(hook.url()));
    CHECK(outcome.result == "failed");
    CHECK_THAT(outcome.detail, Catch::Contains("answered HTTP " + std::to_string(status)));
    CHECK(outcome.undo.empty());
  }
}

TEST_CASE("hook fence: a silent, trickling or enormous hook fails within its timeout",
          "[remediation][hook]") {
  for (Hostility hostility : {Hostility::kSilent, Hostility::kTrickleHeader, Hostility::kHugeBody,
                              Hostility::kEndlessHeader}) {
    CAPTURE(static_cast<int>(hostility));
    sbd::testing::HostileHttp hostile(hostility, 1, "", milliseconds(100));
    const auto start = std::chrono::steady_clock::now();
    const FenceOutcome outcome = FenceByHook(Target(hostile.url(), milliseconds(500)));
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(outcome.result == "failed");
    CHECK(took < milliseconds(500) + milliseconds(1000));
    CHECK(hostile.accepted() == 1);
  }
  // Nothing listening: refused at once.
  const FenceOutcome refused = FenceByHook(Target("http://127.0.0.1:1/stop", milliseconds(500)));
  CHECK(refused.result == "failed");
}

TEST_CASE("hook fence: neither the token nor the URL's query shows in the detail",
          "[remediation][hook]") {
  Hook hook(500, "");
  HookFenceTarget target = Target(hook.url() + "?key=query-secret-9c1d");
  const FenceOutcome outcome = FenceByHook(target);
  CHECK(outcome.result == "failed");
  CHECK_THAT(outcome.detail, !Catch::Contains("query-secret-9c1d"));
  CHECK_THAT(outcome.detail, !Catch::Contains("hook-secret-7f3a"));
  CHECK_THAT(outcome.detail, Catch::StartsWith(hook.url() + ": "));
}

TEST_CASE("hook token: one printable line from a file or the environment, else why not",
          "[remediation][hook]") {
  sbd::testing::TempDir dir("sbd-hook-token");
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.path() + "/" + name, std::ios::binary) << text;
    return dir.path() + "/" + name;
  };
  using Token = std::optional<std::string>;
  auto ok = ResolveHookToken(write("t1", "abc123\n"), std::nullopt);
  REQUIRE(std::holds_alternative<Token>(ok));
  CHECK(std::get<Token>(ok) == Token("abc123"));
  ok = ResolveHookToken(write("t2", "abc\r\nsecond line\n"), std::nullopt);
  CHECK(std::get<Token>(ok) == Token("abc"));
  CHECK(std::get<Token>(ResolveHookToken(std::nullopt, std::nullopt)) == std::nullopt);
  for (const std::string& bad : {write("t3", ""), write("t4", "\n"),
                                 write("t5",
                                       "a\x01"
                                       "b\n"),
                                 write("t6", std::string(5000, 'k')), dir.path() + "/missing"}) {
    CAPTURE(bad);
    auto failed = ResolveHookToken(bad, std::nullopt);
    REQUIRE(std::holds_alternative<std::string>(failed));
    CHECK_THAT(std::get<std::string>(failed), Catch::Contains("token_file " + bad));
    CHECK_THAT(std::get<std::string>(failed), !Catch::Contains("kkkk"));
  }
  setenv("SBD_TEST_HOOK_TOKEN", "from-env", 1);
  CHECK(std::get<Token>(ResolveHookToken(std::nullopt, std::string("SBD_TEST_HOOK_TOKEN"))) ==
        Token("from-env"));
  setenv("SBD_TEST_HOOK_TOKEN", "in\rjected", 1);
  CHECK(std::holds_alternative<std::string>(
      ResolveHookToken(std::nullopt, std::string("SBD_TEST_HOOK_TOKEN"))));
  unsetenv("SBD_TEST_HOOK_TOKEN");
  auto unset = ResolveHookToken(std::nullopt, std::string("SBD_TEST_HOOK_TOKEN"));
  REQUIRE(std::holds_alternative<std::string>(unset));
  CHECK_THAT(std::get<std::string>(unset), Catch::Contains("SBD_TEST_HOOK_TOKEN is not set"));
}

}  // namespace sbd
