// The HTTP side of the probes against real loopback listeners: malformed, oversized, hung and
// refused targets each give a failure with a reason, within the deadline.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "detector/engine/scheduler.h"
#include "probes/etcd.h"
#include "probes/http_json.h"
#include "probes/http_loop.h"
#include "probes/patroni.h"
#include "tests/support/hostile_http.h"
#include "tests/support/on_loop.h"
#include "tests/support/process.h"
#include "tests/support/syn_drop.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;

/// An httplib server on a free loopback port, serving on a background thread.
class LocalServer {
 public:
  LocalServer() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // Bound already: connections wait in the backlog until listen_after_bind() serves them.
  }
  ~LocalServer() {
    server_.stop();
    thread_.join();
  }
  httplib::Server& server() { return server_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

/// A socket that listens but never accepts or answers: a black-holed API.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 16);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  int port_;
};

int ClosedPort() {
  SilentListener listener;
  const std::string url = listener.url();
  return std::stoi(url.substr(url.rfind(':') + 1));  // closed when `listener` dies
}

ProbeFailureReason ReasonOf(const std::variant<nlohmann::json, ProbeFailure>& result) {
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  return std::get<ProbeFailure>(result).reason;
}

}  // namespace

TEST_CASE("http probe: an answer trickling in past the deadline is a timeout", "[http]") {
  LocalServer server;
  server.server().Get("/patroni", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider(
        "application/json", [](size_t offset, httplib::DataSink& sink) {
          std::this_thread::sleep_for(milliseconds(50));  // the server's pace: each read is quick
          const std::string chunk = offset == 0 ? "[" : "0,";
          sink.write(chunk.data(), chunk.size());
          if (offset > 4000) sink.done();
          return true;
        });
  });
  const auto started = SteadyClock::now();
  CHECK(ReasonOf(
            testing::FetchJsonOnLoop(server.url(), "/patroni", "", started + milliseconds(400))) ==
        ProbeFailureReason::kTimeout);
  CHECK(SteadyClock::now() - started < milliseconds(900));
}

TEST_CASE("http probe: a JSON answer is parsed", "[http]") {
  LocalServer server;
  server.server().Get("/patroni", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"state":"running"})", "application/json");
  });
  auto result = testing::FetchJsonOnLoop(server.url(), "/patroni", "",
                                         SteadyClock::now() + milliseconds(500));
  REQUIRE(std::holds_alternative<nlohmann::json>(result));
  CHECK(std::get<nlohmann::json>(result)["state"] == "running");
}

TEST_CASE("http probe: malformed, oversized, refused and hung targets are failures with reasons",
          "[http]") {
  LocalServer server;
  server.server().Get("/broken", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"state\": \"runn", "application/json");
  });
  server.server().Get("/huge", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("[" + std::string(2 * kMaxResponseBytes, ' ') + "]", "application/json");
  });
  server.server().Get("/missing", [](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content("{}", "application/json");
  });
  const auto deadline = [] { return SteadyClock::now() + milliseconds(500); };

  CHECK(ReasonOf(testing::FetchJsonOnLoop(server.url(), "/broken", "", deadline())) ==
        ProbeFailureReason::kProtocol);
  CHECK(ReasonOf(testing::FetchJsonOnLoop(server.url(), "/huge", "", deadline())) ==
        ProbeFailureReason::kProtocol);
  CHECK(ReasonOf(testing::FetchJsonOnLoop(server.url(), "/missing", "", deadline())) ==
        ProbeFailureReason::kProtocol);
  CHECK(ReasonOf(testing::FetchJsonOnLoop("http://127.0.0.1:" + std::to_string(ClosedPort()),
                                          "/patroni", "", deadline())) ==
        ProbeFailureReason::kRefused);

  SilentListener silent;
  const auto start = SteadyClock::now();
  CHECK(
      ReasonOf(testing::FetchJsonOnLoop(silent.url(), "/patroni", "", start + milliseconds(300))) ==
      ProbeFailureReason::kTimeout);
  const double took = std::chrono::duration<double>(SteadyClock::now() - start).count();
  INFO("a black-holed API took " << took << " s against a 0.3 s deadline");
  CHECK(took < 0.3 + 0.2);
}

TEST_CASE("http probe: base64 round trips and rejects garbage", "[http]") {
  const std::vector<std::string> texts = {
      "", "a", "ab", "abc", "/service/demo/leader", std::string("\0\xff", 2)};
  for (const std::string& text : texts) {
    CHECK(Base64Decode(Base64Encode(text)) == text);
  }
  CHECK(Base64Encode("/service/demo/leader") == "L3NlcnZpY2UvZGVtby9sZWFkZXI=");
  CHECK_FALSE(Base64Decode("abc").has_value());
  CHECK_FALSE(Base64Decode("!!!!").has_value());
}

TEST_CASE("http probe: URL bases drop paths and credentials", "[http]") {
  CHECK(UrlBase("http://127.0.0.1:8008/patroni") == "http://127.0.0.1:8008");
  CHECK(UrlBase("https://user:secret@am.example:9093/prefix") == "https://am.example:9093");
  CHECK(UrlBase("127.0.0.1:2379") == "http://127.0.0.1:2379");
}

TEST_CASE("etcd probe: the second endpoint answers when the first is black-holed", "[http]") {
  LocalServer etcd;
  etcd.server().Post("/v3/kv/range", [](const httplib::Request& req, httplib::Response& res) {
    auto body = nlohmann::json::parse(req.body);
    CHECK(body["key"] == Base64Encode("/service/demo/"));
    CHECK(body["range_end"] == Base64Encode("/service/demo0"));
    nlohmann::json answer = {{"kvs",
                              {{{"key", Base64Encode("/service/demo/leader")},
                                {"value", Base64Encode("pg-2")},
                                {"mod_revision", "42"},
                                {"lease", "7587869722434566000"}}}}};
    res.set_content(answer.dump(), "application/json");
  });
  etcd.server().Post(
      "/v3/lease/timetolive", [](const httplib::Request& req, httplib::Response& res) {
        CHECK(nlohmann::json::parse(req.body)["ID"] == "7587869722434566000");
        res.set_content(R"({"ID":"7587869722434566000","TTL":"7","grantedTTL":"10"})",
                        "application/json");
      });
  SilentListener hung;
  EtcdScopeProbe probe({hung.url(), etcd.url()}, "/service", "demo");
  auto result = probe.Read(SteadyClock::now() + milliseconds(800));
  REQUIRE(std::holds_alternative<LockRecord>(result));
  const LockRecord& view = std::get<LockRecord>(result);
  CHECK(view.holder == "pg-2");
  CHECK(view.mod_revision == 42);
  CHECK(view.lease_ttl_remaining == 7);
  CHECK(view.lease_granted_ttl == 10);
  CHECK(view.endpoint == etcd.url());
}

TEST_CASE("etcd probe: every endpoint down is one failure naming the last endpoint", "[http]") {
  SilentListener hung;
  EtcdScopeProbe probe({"http://127.0.0.1:" + std::to_string(ClosedPort()), hung.url()}, "/service",
                       "demo");
  const auto start = SteadyClock::now();
  auto result = probe.Read(start + milliseconds(400));
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  CHECK(std::get<ProbeFailure>(result).message.find(hung.url()) == 0);
  CHECK(SteadyClock::now() - start < milliseconds(400 + 200));
}

TEST_CASE("patroni probe: malformed claims are protocol failures", "[http]") {
  auto missing_scope = PatroniRestProbe::ParsePatroni(
      nlohmann::json::parse(R"({"state":"running","role":"master"})"));
  REQUIRE(std::holds_alternative<ProbeFailure>(missing_scope));
  CHECK(std::get<ProbeFailure>(missing_scope).reason == ProbeFailureReason::kProtocol);
  auto not_object = PatroniRestProbe::ParsePatroni(nlohmann::json::parse("[1,2]"));
  CHECK(std::holds_alternative<ProbeFailure>(not_object));
  PatroniReading reading;
  CHECK(PatroniRestProbe::ParseCluster(nlohmann::json::parse(R"({"members":"no"})"), &reading));
}

}  // namespace sbd

namespace sbd {
namespace {

nlohmann::json Recorded(const std::string& name) {
  std::ifstream in(std::string(SBD_TESTDATA_DIR) + "/patroni/" + name);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("patroni probe: Patroni 3.0.2's recorded answers parse", "[http]") {
  auto leader = PatroniRestProbe::ParsePatroni(Recorded("patroni-leader.json"));
  REQUIRE(std::holds_alternative<PatroniReading>(leader));
  const auto& l = std::get<PatroniReading>(leader);
  CHECK(l.role == "primary");  // 3.0.2 says "master"
  CHECK(l.state == "running");
  CHECK(l.scope == "sbd-selftest");
  CHECK(l.timeline == 1);
  CHECK(l.system_identifier == "7713570374210613906");
  CHECK(l.dcs_last_seen.has_value());

  auto replica = PatroniRestProbe::ParsePatroni(Recorded("patroni-replica.json"));
  REQUIRE(std::holds_alternative<PatroniReading>(replica));
  CHECK(std::get<PatroniReading>(replica).role == "replica");

  PatroniReading reading;
  CHECK_FALSE(PatroniRestProbe::ParseCluster(Recorded("cluster.json"), &reading));
  CHECK(reading.cluster_leader == "node1");
  CHECK(reading.cluster_members.size() == 3);
  CHECK(reading.cluster_members[1].state == "running");
}

TEST_CASE("etcd probe: recorded ranges give holder, revision, lineage and members", "[http]") {
  auto all = EtcdScopeProbe::ParseRange(Recorded("etcd-range-all.json"), "/service/sbd-selftest/");
  REQUIRE(std::holds_alternative<LockRecord>(all));
  const LockRecord& view = std::get<LockRecord>(all);
  CHECK(view.holder == "node1");
  CHECK(view.mod_revision > 0);
  CHECK(view.lease_id != "0");
  CHECK(view.initialize == "7713570374210613906");
  CHECK(view.config_ttl == 10);
  REQUIRE(view.members.size() == 3);
  CHECK(view.members[0].conn_url.rfind("postgres://127.0.0.1:", 0) == 0);
  CHECK(view.members[0].api_url.find("/patroni") != std::string::npos);

  // Discovery turns a registered member into a probe target without any secret.
  ClusterSpec spec;
  spec.discovery.enabled = true;
  spec.discovery.dsn = "user=splitbrain dbname=postgres";
  spec.discovery.password_file = "/etc/splitbrain/pass";
  auto member = DiscoveredMember(spec, view.members[0]);
  REQUIRE(member);
  CHECK(member->name == "node1");
  CHECK(member->dsn.find("host='127.0.0.1' port='") == 0);
  CHECK(member->patroni_url.rfind("http://127.0.0.1:", 0) == 0);
  CHECK(member->discovered);

  auto frozen = EtcdScopeProbe::ParseRange(Recorded("etcd-range-leader-during-freeze.json"),
                                           "/service/sbd-selftest/");
  REQUIRE(std::holds_alternative<LockRecord>(frozen));
}

}  // namespace sbd

namespace sbd {

TEST_CASE("patroni probe: a wrongly typed field over HTTP is a protocol failure", "[http]") {
  LocalServer patroni;
  patroni.server().Get("/patroni", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"state":"running","role":"master","timeline":1,"patroni":{"scope":"demo"},)"
                    R"("pause":"yes"})",
                    "application/json");
  });
  PatroniRestProbe probe(patroni.url());
  std::variant<PatroniReading, ProbeFailure> result;
  REQUIRE_NOTHROW(result = probe.Read(SteadyClock::now() + milliseconds(800)));
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  CHECK(std::get<ProbeFailure>(result).reason == ProbeFailureReason::kProtocol);
  CHECK(std::get<ProbeFailure>(result).message == "/patroni: pause is not a boolean");
}

TEST_CASE("etcd probe: a poisoned member key and a malformed lease answer leave the lock view",
          "[http]") {
  LocalServer etcd;
  etcd.server().Post("/v3/kv/range", [](const httplib::Request&, httplib::Response& res) {
    nlohmann::json answer = {{"kvs",
                              {{{"key", Base64Encode("/service/demo/leader")},
                                {"value", Base64Encode("pg-2")},
                                {"mod_revision", "42"},
                                {"lease", "7587869722434566000"}},
                               {{"key", Base64Encode("/service/demo/members/evil")},
                                {"value", Base64Encode(R"({"conn_url": 5})")},
                                {"mod_revision", "43"}}}}};
    res.set_content(answer.dump(), "application/json");
  });
  etcd.server().Post("/v3/lease/timetolive", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"ID":"7587869722434566000","TTL":{"s":7},"grantedTTL":"10"})",
                    "application/json");
  });
  EtcdScopeProbe probe({etcd.url()}, "/service", "demo");
  std::variant<LockRecord, ProbeFailure> result;
  REQUIRE_NOTHROW(result = probe.Read(SteadyClock::now() + milliseconds(800)));
  REQUIRE(std::holds_alternative<LockRecord>(result));
  const LockRecord& view = std::get<LockRecord>(result);
  CHECK(view.holder == "pg-2");
  CHECK(view.members.empty());
  CHECK(view.lease_ttl_remaining == -1);
  CHECK(view.rejected == std::vector<std::string>{"members/evil: conn_url is not a string",
                                                  "lease: TTL is not a decimal integer"});
}

}  // namespace sbd

namespace sbd {
namespace {

// One request on its own event loop, waited for; `took` is from the send to the answer.
HttpResult RequestOnLoop(const HttpRequest& request, milliseconds budget, double* took) {
  EventLoop loop;
  std::promise<HttpResult> promise;
  auto answer = promise.get_future();
  std::unique_ptr<LoopHttpClient> client;
  const auto start = SteadyClock::now();
  loop.Post([&] {
    client = std::make_unique<LoopHttpClient>(loop);
    client->Start(request, start + budget,
                  [&](HttpResult result) { promise.set_value(std::move(result)); });
  });
  REQUIRE(answer.wait_for(budget + std::chrono::seconds(5)) == std::future_status::ready);
  *took = std::chrono::duration<double>(SteadyClock::now() - start).count();
  HttpResult result = answer.get();
  std::promise<void> closed;
  loop.Post([&] {
    client.reset();
    closed.set_value();
  });
  closed.get_future().wait();
  return result;
}

// The failure of a request to a hostile endpoint, checked to come within deadline + grace.
ProbeFailure HostileFailure(testing::Hostility hostility, milliseconds budget) {
  testing::HostileHttp server(hostility);
  HttpRequest request;
  request.url = server.url();
  double took = 0;
  HttpResult result = RequestOnLoop(request, budget, &took);
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  const ProbeFailure failure = std::get<ProbeFailure>(result);
  INFO(failure.message << " after " << took << " s against a budget of " << budget.count()
                       << " ms");
  CHECK(took < std::chrono::duration<double>(budget).count() + 0.25);
  return failure;
}

bool Says(const ProbeFailure& failure, const std::string& text) {
  return failure.message.find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("LoopHttpClient: a normal answer comes with its status and body", "[http][loop]") {
  testing::HostileHttp server(testing::Hostility::kNormal, 1, "up 1\n");
  HttpRequest request;
  request.url = server.url();
  double took = 0;
  HttpResult result = RequestOnLoop(request, milliseconds(1000), &took);
  REQUIRE(std::holds_alternative<HttpAnswer>(result));
  CHECK(std::get<HttpAnswer>(result).status == 200);
  CHECK(std::get<HttpAnswer>(result).body == "up 1\n");
}

TEST_CASE("LoopHttpClient: a trickled status line or header fails at the whole deadline",
          "[http][loop]") {
  for (auto hostility : {testing::Hostility::kTrickleStatus, testing::Hostility::kTrickleHeader}) {
    const ProbeFailure failure = HostileFailure(hostility, milliseconds(1200));
    INFO(failure.message);
    CHECK(failure.reason == ProbeFailureReason::kTimeout);
    CHECK(Says(failure, "the answer outlasted the deadline of"));
    // The phase it got to: the bound it broke.
    CHECK(Says(failure, hostility == testing::Hostility::kTrickleStatus
                            ? " ms: no complete status line"
                            : " ms: the headers not complete"));
  }
}

TEST_CASE("LoopHttpClient: an endless header line is cut, never read to the deadline",
          "[http][loop]") {
  const ProbeFailure failure =
      HostileFailure(testing::Hostility::kEndlessHeader, milliseconds(3000));
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(Says(failure, "a header line longer than"));
}

TEST_CASE("LoopHttpClient: too many headers, a long status line and a huge body name their cap",
          "[http][loop]") {
  const ProbeFailure many = HostileFailure(testing::Hostility::kManyHeaders, milliseconds(3000));
  CHECK(many.reason == ProbeFailureReason::kProtocol);
  CHECK(Says(many, "more than 100 headers"));
  const ProbeFailure status = HostileFailure(testing::Hostility::kLongStatus, milliseconds(3000));
  CHECK(status.reason == ProbeFailureReason::kProtocol);
  CHECK(Says(status, "status line longer than 1024 bytes"));
  const ProbeFailure body = HostileFailure(testing::Hostility::kHugeBody, milliseconds(3000));
  CHECK(body.reason == ProbeFailureReason::kProtocol);
  CHECK(Says(body, "answer larger than 1048576 bytes"));
}

TEST_CASE("LoopHttpClient: silence, a closed port and another scheme are failures with reasons",
          "[http][loop]") {
  const ProbeFailure silent = HostileFailure(testing::Hostility::kSilent, milliseconds(500));
  CHECK(silent.reason == ProbeFailureReason::kTimeout);
  CHECK(Says(silent, "the answer outlasted the deadline of"));
  CHECK(Says(silent, " ms: no complete status line"));
  HttpRequest request;
  double took = 0;
  request.url = "http://127.0.0.1:" + std::to_string(ClosedPort()) + "/metrics";
  HttpResult refused = RequestOnLoop(request, milliseconds(500), &took);
  REQUIRE(std::holds_alternative<ProbeFailure>(refused));
  CHECK(std::get<ProbeFailure>(refused).reason == ProbeFailureReason::kRefused);
  request.url = "file:///etc/passwd";
  HttpResult file = RequestOnLoop(request, milliseconds(500), &took);
  REQUIRE(std::holds_alternative<ProbeFailure>(file));
  CHECK(std::get<ProbeFailure>(file).reason == ProbeFailureReason::kConfig);
}

TEST_CASE("LoopHttpClient: an address whose SYNs are dropped fails at the deadline, in connect",
          "[http][loop][hostile]") {
  testing::SynDropListener dropped;
  HttpRequest request;
  request.url = "http://" + dropped.address() + "/metrics";
  double took = 0;
  HttpResult result = RequestOnLoop(request, milliseconds(700), &took);
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  const ProbeFailure failure = std::get<ProbeFailure>(result);
  INFO(failure.message << " after " << took << " s");
  CHECK(failure.reason == ProbeFailureReason::kTimeout);
  CHECK(Says(failure, " ms: no connection made"));
  CHECK(took >= 0.65);  // it waited for the SYN-ACK that never came, not refused at once
  CHECK(took < 0.7 + 0.25);
}

namespace {

// An etcd gateway that holds /service/demo/leader (pg-2, lease 7 s of 10 s).
void ServeDemoScope(LocalServer& etcd) {
  etcd.server().Post("/v3/kv/range", [](const httplib::Request&, httplib::Response& res) {
    nlohmann::json answer = {{"kvs",
                              {{{"key", Base64Encode("/service/demo/leader")},
                                {"value", Base64Encode("pg-2")},
                                {"mod_revision", "42"},
                                {"lease", "7587869722434566000"}}}}};
    res.set_content(answer.dump(), "application/json");
  });
  etcd.server().Post("/v3/lease/timetolive", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"ID":"7587869722434566000","TTL":"7","grantedTTL":"10"})",
                    "application/json");
  });
}

double MillisSince(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

}  // namespace

TEST_CASE(
    "EtcdScopeProbe: on the event loop, a trickling endpoint costs its share of the deadline "
    "and the next endpoint answers",
    "[http][loop]") {
  LocalServer etcd;
  ServeDemoScope(etcd);
  testing::HostileHttp trickle(testing::Hostility::kTrickleHeader);
  const std::string hostile = UrlBase(trickle.url());
  EtcdScopeProbe probe({hostile, etcd.url()}, "/service", "demo");
  auto start = SteadyClock::now();
  auto result = probe.Read(start + milliseconds(1600));
  double took = MillisSince(start);
  INFO("read after " << took << " ms");
  REQUIRE(std::holds_alternative<LockRecord>(result));
  CHECK(std::get<LockRecord>(result).holder == "pg-2");
  CHECK(std::get<LockRecord>(result).lease_ttl_remaining == 7);
  CHECK(std::get<LockRecord>(result).endpoint == etcd.url());
  // The trickle cost its half of the deadline, not all of it.
  CHECK(took >= 800 - 50);
  CHECK(took < 800 + 400);

  // The endpoint that answered is tried first next time.
  start = SteadyClock::now();
  result = probe.Read(start + milliseconds(1600));
  REQUIRE(std::holds_alternative<LockRecord>(result));
  CHECK(MillisSince(start) < 400);

  // The trickling endpoint alone fails at its deadline, naming it and the bound.
  EtcdScopeProbe alone({hostile}, "/service", "demo");
  start = SteadyClock::now();
  result = alone.Read(start + milliseconds(800));
  took = MillisSince(start);
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  const ProbeFailure& failure = std::get<ProbeFailure>(result);
  INFO(failure.message << " after " << took << " ms");
  CHECK(failure.reason == ProbeFailureReason::kTimeout);
  CHECK(failure.message.rfind(hostile + ": ", 0) == 0);
  CHECK(Says(failure, "outlasted the deadline"));
  CHECK(took < 800 + 250);
}

namespace {

// A Patroni REST API answering /patroni and /cluster with Patroni 3.0.2's recorded answers.
void ServeRecordedPatroni(LocalServer& patroni) {
  patroni.server().Get("/patroni", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(Recorded("patroni-leader.json").dump(), "application/json");
  });
  patroni.server().Get("/cluster", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(Recorded("cluster.json").dump(), "application/json");
  });
}

size_t ThreadsOfThisProcess() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("PatroniRestProbe: a trickling REST API fails at its deadline naming the bound",
          "[http][loop]") {
  testing::HostileHttp trickle(testing::Hostility::kTrickleHeader);
  PatroniRestProbe probe(UrlBase(trickle.url()));
  const auto start = SteadyClock::now();
  auto result = probe.Read(start + milliseconds(800));
  const double took = MillisSince(start);
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  const ProbeFailure& failure = std::get<ProbeFailure>(result);
  INFO(failure.message << " after " << took << " ms");
  CHECK(failure.reason == ProbeFailureReason::kTimeout);
  // The bound it names is the time left when the request started: 800 ms, or a little less
  // on a loaded machine (799 ms under ASan).
  const std::string prefix = "GET /patroni: the answer outlasted the deadline of ";
  REQUIRE(failure.message.rfind(prefix, 0) == 0);
  const int named = std::stoi(failure.message.substr(prefix.size()));
  CHECK(named <= 800);
  CHECK(named >= 700);
  const std::string phase = " ms: the headers not complete";
  CHECK(failure.message.substr(failure.message.size() - phase.size()) == phase);
  CHECK(took < 800 + 250);
}

TEST_CASE(
    "PatroniRestProbe: forty trickling REST APIs hold no thread while a healthy one reads on "
    "the same loop",
    "[http][loop]") {
  constexpr int kHung = 40;
  testing::HostileHttp trickle(testing::Hostility::kTrickleHeader, kHung);
  LocalServer healthy_api;
  ServeRecordedPatroni(healthy_api);
  std::vector<std::unique_ptr<PatroniRestProbe>> hung;
  for (int i = 0; i < kHung; ++i) {
    hung.push_back(std::make_unique<PatroniRestProbe>(UrlBase(trickle.url(i))));
  }
  PatroniRestProbe healthy(healthy_api.url());
  CHECK(
      std::holds_alternative<PatroniReading>(healthy.Read(SteadyClock::now() + milliseconds(800))));
  const size_t before = ThreadsOfThisProcess();

  std::mutex mu;
  std::vector<ProbeFailure> failures;
  std::promise<void> all_failed;
  const auto start = SteadyClock::now();
  const auto deadline = start + milliseconds(1500);
  for (auto& probe : hung) {
    PatroniRestProbe* p = probe.get();
    p->loop().Post([p, deadline, &mu, &failures, &all_failed] {
      p->Start(deadline, [&](std::variant<PatroniReading, ProbeFailure> read) {
        bool last = false;
        {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(std::holds_alternative<ProbeFailure>(read)
                                 ? std::get<ProbeFailure>(read)
                                 : ProbeFailure{ProbeFailureReason::kInternal, "read"});
          last = failures.size() == kHung;
        }
        // Released first: the test returns (and `mu` goes) once the promise is set.
        if (last) all_failed.set_value();
      });
    });
  }
  REQUIRE(testing::WaitFor([&] { return trickle.accepted() == kHung; }, milliseconds(1500)));
  const size_t during = ThreadsOfThisProcess();
  // The healthy API reads while the forty trickle, on the same loop.
  auto read = healthy.Read(SteadyClock::now() + milliseconds(800));
  const auto healthy_at = SteadyClock::now();
  REQUIRE(all_failed.get_future().wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  const double took = MillisSince(start);
  std::lock_guard<std::mutex> lock(mu);
  if (auto* failure = std::get_if<ProbeFailure>(&read)) FAIL(failure->message);
  CHECK(std::get<PatroniReading>(read).role == "primary");
  CHECK(healthy_at < deadline);
  std::printf("patroni rest: %zu threads before, %zu with %d trickling APIs\n", before, during,
              kHung);
  CHECK(during == before);
  INFO("all failed after " << took << " ms");
  CHECK(took < 1500 + 300);
  for (const ProbeFailure& failure : failures) {
    INFO(failure.message);
    CHECK(failure.reason == ProbeFailureReason::kTimeout);
    CHECK(Says(failure, "outlasted the deadline"));
  }
}

}  // namespace sbd
