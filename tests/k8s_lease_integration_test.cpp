// Issue 13, Kubernetes Leases (read side). No Kubernetes API server runs on these machines, so
// the test harness serves Lease objects in the documented coordination.k8s.io/v1 shape over
// real HTTPS (httplib::SSLServer, a CA and a server certificate made with the openssl CLI at
// test time, a bearer token checked), and in-process candidates export client-go's
// leader_election_master_status. The store is read directly and through the real detector
// binary, which pages through a real Alertmanager 0.25.
#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "probes/http_loop.h"
#include "probes/k8s_lease.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/hostile_http.h"
#include "tests/support/process.h"

namespace {

using nlohmann::json;
using sbd::testing::AlertmanagerServer;
using sbd::testing::DetectorProcess;
using sbd::testing::HttpGet;
using sbd::testing::TempDir;
using sbd::testing::WaitFor;
using sbd::testing::WebhookReceiver;
using sbd::testing::WriteFile;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kToken = "sbd-test-bearer-9f3c1e";  // must never show anywhere

void Openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = sbd::testing::RunCommand(argv, false, std::chrono::seconds(60));
  if (r.exit_code != 0) throw std::runtime_error(sbd::testing::FormatArgv(argv) + ":\n" + r.output);
}

// A CA (`name`.crt/.key) and, signed by it, a server certificate for IP 127.0.0.1.
struct Pki {
  std::string ca, cert, key;
  Pki(const std::string& dir, const std::string& name) {
    ca = dir + "/" + name + "-ca.crt";
    cert = dir + "/" + name + "-server.crt";
    key = dir + "/" + name + "-server.key";
    const std::string ca_key = dir + "/" + name + "-ca.key";
    const std::string csr = dir + "/" + name + ".csr";
    const std::string ext = WriteFile(dir, name + ".ext", "subjectAltName=IP:127.0.0.1\n");
    Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-days", "2", "-subj", "/CN=sbd-test-" + name + "-ca", "-keyout", ca_key, "-out", ca});
    Openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj",
             "/CN=127.0.0.1", "-keyout", key, "-out", csr});
    Openssl({"x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days",
             "2", "-extfile", ext, "-out", cert});
  }
};

std::string Rfc3339(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(micros));
  return text;
}

// An API server serving one Lease (default/orders) in the documented shape, renewed by whoever
// holds it at every GET while `renewing`. Thread-safe.
class FakeApiServer {
 public:
  explicit FakeApiServer(const Pki& pki) : server_(pki.cert.c_str(), pki.key.c_str()) {
    server_.Get("/apis/coordination.k8s.io/v1/namespaces/default/leases/orders",
                [this](const httplib::Request& req, httplib::Response& res) { Serve(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeApiServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  // A new holder (empty: released): a new epoch, renewed now.
  void Hand(const std::string& holder) {
    std::lock_guard<std::mutex> lock(mu_);
    holder_ = holder;
    ++transitions_;
    renew_ = std::chrono::system_clock::now();
  }
  int gets() const {
    std::lock_guard<std::mutex> lock(mu_);
    return gets_;
  }

 private:
  void Serve(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    ++gets_;
    if (req.get_header_value("Authorization") != std::string("Bearer ") + kToken) {
      res.status = 401;
      res.set_content(R"({"kind":"Status","apiVersion":"v1","status":"Failure",)"
                      R"("message":"Unauthorized","reason":"Unauthorized","code":401})",
                      "application/json");
      return;
    }
    if (!holder_.empty()) renew_ = std::chrono::system_clock::now();
    // As the Kubernetes docs show a Lease (kubectl get lease -o json).
    json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata",
                   {{"creationTimestamp", "2023-07-02T13:16:48Z"},
                    {"name", "orders"},
                    {"namespace", "default"},
                    {"resourceVersion", std::to_string(334899 + gets_)},
                    {"uid", "90870ab5-1ba9-4523-b215-e4d4e662acb1"}}},
                  {"spec",
                   {{"holderIdentity", holder_},
                    {"leaseDurationSeconds", 3},
                    {"acquireTime", Rfc3339(renew_)},
                    {"renewTime", Rfc3339(renew_)},
                    {"leaseTransitions", transitions_}}}};
    res.set_content(lease.dump(), "application/json");
  }

  httplib::SSLServer server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::string holder_ = "pod-a";
  int transitions_ = 0;
  std::chrono::system_clock::time_point renew_ = std::chrono::system_clock::now();
  int gets_ = 0;
};

// A client-go candidate's /metrics: leader_election_master_status{name="orders"} 0 or 1.
class Candidate {
 public:
  explicit Candidate(bool leading) : leading_(leading) {
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(
          "# TYPE leader_election_master_status gauge\n"
          "leader_election_master_status{name=\"orders\"} " +
              std::string(leading_ ? "1" : "0") + "\n",
          "text/plain; version=0.0.4");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Candidate() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/metrics"; }
  void Lead(bool leading) { leading_ = leading; }

 private:
  std::atomic<bool> leading_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

sbd::ClusterSpec Spec(const std::string& server, const std::string& ca, const std::string& token) {
  sbd::ClusterSpec spec;
  spec.name = "orders";
  spec.kind = "k8s_lease";
  spec.k8s_lease.api_server = server;
  spec.k8s_lease.lease = "orders";
  spec.k8s_lease.lock = "orders";
  spec.k8s_lease.ca_file = ca;
  spec.k8s_lease.token_file = token;
  sbd::MemberSpec a;
  a.name = "a";
  a.lease_identity = "pod-a";
  spec.members = {a};
  return spec;
}

sbd::ProbeFailure Failure(const std::variant<sbd::LockRecord, sbd::ProbeFailure>& read) {
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(read));
  return std::get<sbd::ProbeFailure>(read);
}

Clock::time_point Soon() { return Clock::now() + milliseconds(3000); }

}  // namespace

TEST_CASE("k8s_lease store: the Lease over verified HTTPS gives holder, epoch and time left",
          "[k8s]") {
  TempDir dir{"sbd-k8s"};
  const Pki pki(dir.path(), "cluster");
  FakeApiServer api(pki);
  const std::string token = WriteFile(dir.path(), "token", std::string(kToken) + "\n");
  sbd::K8sLeaseStore store(Spec(api.url(), pki.ca, token));
  auto read = store.Read(Soon());
  if (auto* failure = std::get_if<sbd::ProbeFailure>(&read)) FAIL(failure->message);
  const sbd::LockRecord view = std::get<sbd::LockRecord>(read);
  CHECK(view.holder == "a");
  CHECK(view.holder_token == "pod-a");
  CHECK(view.mod_revision == 0);
  CHECK(view.lease_granted_ttl == 3);
  CHECK(view.lease_ttl_remaining >= 2);
  CHECK(view.lease_ttl_remaining <= 4);  // the Date header has whole seconds
  CHECK(view.rejected.empty());
  CHECK(view.endpoint == api.url());
  api.Hand("pod-b");
  const sbd::LockRecord moved = std::get<sbd::LockRecord>(store.Read(Soon()));
  CHECK(moved.holder.empty());  // no member is pod-b: the engine matches the claims' tokens
  CHECK(moved.holder_token == "pod-b");
  CHECK(moved.mod_revision == 1);
}

TEST_CASE("k8s_lease store: a rejected token fails naming the Lease, never the token", "[k8s]") {
  TempDir dir{"sbd-k8s"};
  const Pki pki(dir.path(), "cluster");
  FakeApiServer api(pki);
  const std::string token = WriteFile(dir.path(), "token", "wrong-token-7d1a");
  sbd::K8sLeaseStore store(Spec(api.url(), pki.ca, token));
  const sbd::ProbeFailure failure = Failure(store.Read(Soon()));
  CHECK(failure.reason == sbd::ProbeFailureReason::kAuth);
  CHECK(failure.message == "GET Lease default/orders: HTTP 401: the token was not accepted");
  CHECK(failure.message.find("wrong-token") == std::string::npos);
  CHECK(api.gets() == 1);
}

TEST_CASE("k8s_lease store: a server certificate from another CA is refused before any GET",
          "[k8s]") {
  TempDir dir{"sbd-k8s"};
  const Pki pki(dir.path(), "cluster");
  const Pki other(dir.path(), "other");
  FakeApiServer api(pki);
  const std::string token = WriteFile(dir.path(), "token", kToken);
  sbd::K8sLeaseStore store(Spec(api.url(), other.ca, token));
  const sbd::ProbeFailure failure = Failure(store.Read(Soon()));
  CAPTURE(failure.message);
  CHECK(failure.reason == sbd::ProbeFailureReason::kAuth);
  CHECK(failure.message.find("refused: the API server's certificate does not verify") !=
        std::string::npos);
  CHECK(api.gets() == 0);  // the token never left
}

TEST_CASE("k8s_lease store: a kubeconfig's current context gives server, CA data and token",
          "[k8s]") {
  TempDir dir{"sbd-k8s"};
  const Pki pki(dir.path(), "cluster");
  FakeApiServer api(pki);
  const auto ca =
      sbd::testing::RunCommand({"base64", "-w0", pki.ca}, false, std::chrono::seconds(5));
  REQUIRE(ca.exit_code == 0);
  const std::string kubeconfig =
      WriteFile(dir.path(), "kubeconfig",
                "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n  - name: test\n"
                "    cluster:\n      server: " +
                    api.url() + "\n      certificate-authority-data: " + ca.output +
                    "\ncontexts:\n  - name: test\n    context: {cluster: test, user: bot}\n"
                    "users:\n  - name: bot\n    user: {token: " +
                    kToken + "}\n");
  sbd::ClusterSpec spec = Spec("", "", "");
  spec.k8s_lease.kubeconfig = kubeconfig;
  sbd::K8sLeaseStore store(spec);
  auto read = store.Read(Soon());
  if (auto* failure = std::get_if<sbd::ProbeFailure>(&read)) FAIL(failure->message);
  CHECK(std::get<sbd::LockRecord>(read).holder == "a");
}

namespace {

// One request on its own event loop, waited for.
sbd::HttpResult OnLoop(const sbd::HttpRequest& request, milliseconds budget) {
  sbd::EventLoop loop;
  std::promise<sbd::HttpResult> promise;
  auto answer = promise.get_future();
  std::unique_ptr<sbd::LoopHttpClient> client;
  loop.Post([&] {
    client = std::make_unique<sbd::LoopHttpClient>(loop);
    client->Start(request, Clock::now() + budget,
                  [&](sbd::HttpResult result) { promise.set_value(std::move(result)); });
  });
  REQUIRE(answer.wait_for(budget + std::chrono::seconds(5)) == std::future_status::ready);
  sbd::HttpResult result = answer.get();
  std::promise<void> closed;
  loop.Post([&] {
    client.reset();
    closed.set_value();
  });
  closed.get_future().wait();
  return result;
}

std::string FileText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE(
    "LoopHttpClient: https with a CA and a bearer token reads; a CA that does not sign the "
    "server fails with a reason that never shows the token",
    "[k8s][loop]") {
  TempDir dir{"sbd-k8s"};
  const Pki pki(dir.path(), "cluster");
  const Pki other(dir.path(), "other");
  FakeApiServer api(pki);
  sbd::HttpRequest request;
  request.url = api.url() + "/apis/coordination.k8s.io/v1/namespaces/default/leases/orders";
  request.credentials.ca_file = pki.ca;
  request.credentials.bearer_token = kToken;
  sbd::HttpResult read = OnLoop(request, milliseconds(3000));
  if (auto* failure = std::get_if<sbd::ProbeFailure>(&read)) FAIL(failure->message);
  CHECK(std::get<sbd::HttpAnswer>(read).status == 200);  // the server checked the token
  CHECK(std::get<sbd::HttpAnswer>(read).body.find("\"holderIdentity\":\"pod-a\"") !=
        std::string::npos);

  // The CA in memory, as a kubeconfig's certificate-authority-data gives it.
  request.credentials.ca_file.clear();
  request.credentials.ca_pem = FileText(pki.ca);
  read = OnLoop(request, milliseconds(3000));
  if (auto* failure = std::get_if<sbd::ProbeFailure>(&read)) FAIL(failure->message);
  CHECK(std::get<sbd::HttpAnswer>(read).status == 200);
  const int gets = api.gets();

  // Another CA: refused in the handshake, before the token is sent.
  request.credentials.ca_pem = FileText(other.ca);
  read = OnLoop(request, milliseconds(3000));
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(read));
  const sbd::ProbeFailure refused = std::get<sbd::ProbeFailure>(read);
  CAPTURE(refused.message);
  CHECK(refused.reason == sbd::ProbeFailureReason::kAuth);
  CHECK(refused.message.find("certificate") != std::string::npos);
  CHECK(refused.message.find(kToken) == std::string::npos);
  CHECK(api.gets() == gets);

  // A CA file that does not exist: a failure with a reason, no token either.
  request.credentials.ca_pem.clear();
  request.credentials.ca_file = dir.path() + "/no-such-ca.crt";
  read = OnLoop(request, milliseconds(3000));
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(read));
  const sbd::ProbeFailure missing = std::get<sbd::ProbeFailure>(read);
  CAPTURE(missing.message);
  CHECK_FALSE(missing.message.empty());
  CHECK(missing.message.find(kToken) == std::string::npos);
  CHECK(api.gets() == gets);
}

TEST_CASE(
    "k8s_lease store: on the event loop, a trickling API server fails at its deadline while "
    "another cluster's Lease still reads",
    "[k8s][loop]") {
  TempDir dir{"sbd-k8s"};
  const Pki pki(dir.path(), "cluster");
  FakeApiServer api(pki);
  const std::string token = WriteFile(dir.path(), "token", kToken);
  sbd::testing::HostileHttp trickle(sbd::testing::Hostility::kTrickleHeader);
  const std::string hostile_url = trickle.url().substr(0, trickle.url().rfind('/'));
  sbd::K8sLeaseStore healthy(Spec(api.url(), pki.ca, token));
  sbd::K8sLeaseStore hostile(Spec(hostile_url, pki.ca, token));
  const auto start = Clock::now();
  const milliseconds budget(2000);
  std::variant<sbd::LockRecord, sbd::ProbeFailure> hostile_read;
  std::thread reader([&] { hostile_read = hostile.Read(start + budget); });
  REQUIRE(WaitFor([&] { return trickle.accepted() > 0; }, budget));
  // The healthy Lease reads on the same loop while the trickle holds its request open.
  auto read = healthy.Read(Clock::now() + milliseconds(1500));
  const auto healthy_at = Clock::now();
  reader.join();
  const double took = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (auto* failure = std::get_if<sbd::ProbeFailure>(&read)) FAIL(failure->message);
  CHECK(std::get<sbd::LockRecord>(read).holder == "a");
  CHECK(healthy_at < start + budget);
  const sbd::ProbeFailure failure = Failure(hostile_read);
  INFO(failure.message << " after " << took << " ms");
  CHECK(failure.reason == sbd::ProbeFailureReason::kTimeout);
  CHECK(failure.message.rfind("GET Lease default/orders: the answer outlasted the deadline", 0) ==
        0);
  CHECK(failure.message.find(kToken) == std::string::npos);
  CHECK(took < 2000 + 300);
}

namespace {

std::optional<json> Firing(const WebhookReceiver::Delivery& d, const std::string& name) {
  return sbd::testing::FiringAlert(d, name, "orders");
}

// The fake API server, two candidates (a leads), Alertmanager and the detector binary.
struct K8sSandbox {
  TempDir dir{"sbd-k8s-e2e"};
  Pki pki{dir.path(), "cluster"};
  FakeApiServer api{pki};
  Candidate a{true};
  Candidate b{false};
  WebhookReceiver webhook;
  AlertmanagerServer alertmanager{dir.path() + "/am", webhook.url(), "100ms", "1s"};
  int port = sbd::testing::FreeLoopbackPort();
  std::unique_ptr<DetectorProcess> detector;

  explicit K8sSandbox(const std::string& token = kToken) {
    const std::string token_file = WriteFile(dir.path(), "token", token + "\n");
    const std::string config = WriteFile(
        dir.path(), "detector.yml",
        "alerting:\n  alertmanagers:\n    - url: " + alertmanager.url() +
            "\n  resend_interval: 5s\nclusters:\n"
            "  - name: orders\n    kind: k8s_lease\n    ttl: 3s\n    probe_interval: 300ms\n"
            "    probe_timeout: 250ms\n    k8s_lease:\n      api_server: " +
            api.url() + "\n      token_file: " + token_file + "\n      ca_file: " + pki.ca +
            "\n    members:\n      - name: a\n        metrics_url: " + a.url() +
            "\n        identity: pod-a\n      - name: b\n        metrics_url: " + b.url() +
            "\n        identity: pod-b\n");
    detector =
        sbd::testing::StartReadyDetector(SBD_BINARY, config, port, dir.path() + "/detector.log");
  }

  json Cluster() const { return sbd::testing::ClusterStatus(port, "orders"); }

  // The member /status names as holding the lock, or "".
  std::string Holder() const {
    const json c = Cluster();
    if (c.is_null() || c.value("verdict", "") != "healthy") return "";
    for (const auto& m : c["members"]) {
      if (m.value("holds_lock", false)) return m["name"];
    }
    return "";
  }

  std::optional<json> FirstPage(const std::string& name = "SplitBrain") const {
    for (const auto& d : webhook.Deliveries()) {
      if (auto page = Firing(d, name)) return page;
    }
    return std::nullopt;
  }

  // The token in nothing the detector shows: /status, /metrics, its log.
  void CheckTokenHidden() const {
    CHECK(HttpGet(port, "/status").find(kToken) == std::string::npos);
    CHECK(HttpGet(port, "/metrics").find(kToken) == std::string::npos);
    CHECK(detector->Log().find(kToken) == std::string::npos);
  }
};

struct PrintLogOnFailure {
  const K8sSandbox& sb;
  ~PrintLogOnFailure() {
    if (std::uncaught_exceptions() > 0 && sb.detector) {
      std::printf("detector log:\n%s\n/status:\n%s\n", sb.detector->Log().c_str(),
                  HttpGet(sb.port, "/status").c_str());
    }
  }
};

constexpr milliseconds kTtl{3000};

}  // namespace

TEST_CASE("k8s_lease detector: a steady holder is the Lease's, with its epoch, and pages nobody",
          "[k8s]") {
  K8sSandbox sb;
  PrintLogOnFailure print{sb};
  REQUIRE(WaitFor([&] { return sb.Holder() == "a"; }, 3 * kTtl));
  const auto end = Clock::now() + kTtl;
  while (Clock::now() < end) {
    const json c = sb.Cluster();
    CAPTURE(c.dump());
    REQUIRE(c.value("verdict", "") == "healthy");
    CHECK(c["lock"].value("holder_token", "") == "pod-a");
    CHECK(c["lock"].value("mod_revision", -1) == 0);
    CHECK(c["lock"].value("kind", "") == "k8s_lease");
    CHECK(c["lock"].value("record", "") ==
          "Lease default/orders on " + sb.api.url() + " (revision: leaseTransitions, the epoch)");
    std::this_thread::sleep_for(milliseconds(300));  // the read period, not a wait
  }
  sb.CheckTokenHidden();
  CHECK_FALSE(sb.FirstPage().has_value());
}

TEST_CASE("k8s_lease detector: a clean handover moves the holder and the epoch, no page", "[k8s]") {
  K8sSandbox sb;
  PrintLogOnFailure print{sb};
  REQUIRE(WaitFor([&] { return sb.Holder() == "a"; }, 3 * kTtl));
  // client-go's order: the old leader stops leading, the Lease moves, the new one leads.
  sb.a.Lead(false);
  sb.api.Hand("pod-b");
  sb.b.Lead(true);
  REQUIRE(WaitFor([&] { return sb.Holder() == "b"; }, 3 * kTtl));
  CHECK(sb.Cluster()["lock"].value("mod_revision", -1) == 1);
  std::this_thread::sleep_for(kTtl);  // a TTL of steady rounds after the move, then no page
  CHECK_FALSE(sb.FirstPage().has_value());
}

TEST_CASE(
    "k8s_lease detector: a paused old holder still claiming after the Lease moved is "
    "paged as the zombie",
    "[k8s]") {
  K8sSandbox sb;
  PrintLogOnFailure print{sb};
  REQUIRE(WaitFor([&] { return sb.Holder() == "a"; }, 3 * kTtl));
  // a pauses (its metric stays 1), the Lease moves to b, b leads.
  sb.api.Hand("pod-b");
  sb.b.Lead(true);
  const auto moved_at = Clock::now();
  std::optional<json> page;
  Clock::time_point paged_at;
  REQUIRE(sb.webhook.WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        page = Firing(d, "SplitBrain");
        if (page) paged_at = d.at;
        return page.has_value();
      },
      2 * kTtl));
  const std::string summary = (*page)["annotations"].value("summary", "");
  CAPTURE(summary);
  CHECK(summary.find("zombie a, lock holder b") != std::string::npos);
  CHECK(summary.find("a claims with token pod-a") != std::string::npos);
  CHECK(summary.find("holds token pod-b") != std::string::npos);
  std::printf("k8s_lease detector: paged %.0f ms after the Lease moved\n",
              std::chrono::duration<double, std::milli>(paged_at - moved_at).count());
  sb.CheckTokenHidden();
}

TEST_CASE("k8s_lease detector: a rejected token reads LockStoreUnreadable with the reason",
          "[k8s]") {
  K8sSandbox sb("not-the-token-4b2e");
  PrintLogOnFailure print{sb};
  REQUIRE(WaitFor(
      [&] {
        const json c = sb.Cluster();
        return !c.is_null() && c["lock"].value("readable", true) == false;
      },
      3 * kTtl));
  const std::string error = sb.Cluster()["lock"].value("error", "");
  CHECK(error.find("GET Lease default/orders: HTTP 401: the token was not accepted") !=
        std::string::npos);
  REQUIRE(sb.webhook.WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        return Firing(d, "LockStoreUnreadable").has_value();
      },
      3 * kTtl));
  const json page = *sb.FirstPage("LockStoreUnreadable");
  CAPTURE(page.dump());
  CHECK(page["annotations"]
            .value("description", "")
            .find("Lock store unreadable: GET Lease default/orders: HTTP 401: the token was not "
                  "accepted.") != std::string::npos);
  CHECK(page.dump().find("not-the-token") == std::string::npos);
  CHECK(HttpGet(sb.port, "/status").find("not-the-token") == std::string::npos);
  CHECK(sb.detector->Log().find("not-the-token") == std::string::npos);
}
