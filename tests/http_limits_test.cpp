// The exporter's listener under hostile clients, on a real loopback listener: oversized
// bodies, request lines and headers, slow clients, and the safe default for changes.
#include <arpa/inet.h>
#include <crypt.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "detector/output/exporter.h"
#include "detector/output/metrics.h"
#include "tests/support/bcrypt.h"

namespace sbd {
namespace {

using Clock = std::chrono::steady_clock;

Exporter::Sources Sources(std::vector<std::string>* bodies = nullptr) {
  Exporter::Sources sources;
  sources.metrics =
      std::make_shared<DetectorCollector>([] { return std::vector<ClusterSnapshot>{}; }, nullptr);
  sources.status = [](bool) { return std::string("{}"); };
  sources.ready = [] { return true; };
  sources.list_declarations = [] { return Exporter::Sources::Answer{200, "[]"}; };
  sources.add_declaration = [bodies](const std::string& body) {
    if (bodies != nullptr) bodies->push_back(body);
    return Exporter::Sources::Answer{201, "{}"};
  };
  sources.remove_declaration = [](const std::string&) {
    return Exporter::Sources::Answer{200, "{}"};
  };
  return sources;
}

// A raw client socket, for what no well-behaved HTTP client sends.
class RawClient {
 public:
  explicit RawClient(int port, bool small_window = false) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    if (small_window) ShrinkReceiveBuffer();
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // A server that stopped reading fails the test instead of hanging it.
    timeval timeout{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawClient() { close(fd_); }
  bool connected() const { return connected_; }
  /// False once the server has closed or reset the connection.
  bool Send(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  /// Everything the server sends until it closes or `timeout` passes.
  std::string ReadAll(std::chrono::milliseconds timeout) {
    std::string answer;
    const auto deadline = Clock::now() + timeout;
    char buffer[4096];
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 1))) <= 0) break;
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      answer.append(buffer, static_cast<size_t>(n));
    }
    return answer;
  }
  bool closed() const { return closed_; }
  /// A receive window of a few KiB: a client that then never reads holds the answer up.
  void ShrinkReceiveBuffer() {
    const int size = 4096;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_ = false;
};

long ResidentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// How long GET /-/healthy takes, or a very long time when it fails.
std::chrono::milliseconds HealthyLatency(int port, const std::string& password = "",
                                         std::string* why = nullptr) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(3);
  client.set_read_timeout(3);
  if (!password.empty()) client.set_basic_auth("prometheus", password.c_str());
  const auto start = Clock::now();
  auto answer = client.Get("/-/healthy");
  if (!answer || answer->status != 200) {
    if (why != nullptr) {
      *why += answer ? std::to_string(answer->status) + "; "
                     : httplib::to_string(answer.error()) + "; ";
    }
    return std::chrono::hours(1);
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

struct Running {
  explicit Running(Exporter::Sources sources, WebConfig web = {}, ExporterOptions options = {})
      : exporter(std::move(sources), web, options) {
    std::string error;
    REQUIRE(exporter.Bind("127.0.0.1:0", &error));
    exporter.Start();
  }
  ~Running() { exporter.Stop(); }
  Exporter exporter;
};

using testing::Bcrypt;

// About 1 MB of /metrics: more than loopback buffers hold for a client that does not read.
class LargeMetrics : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily family{"test_padding", "Padding", prometheus::MetricType::Gauge, {}};
    // Few series with long values: cheap to render, many bytes to send.
    for (int i = 0; i < 1000; ++i) {
      prometheus::ClientMetric metric;
      metric.label.push_back({"member", std::string(1000, 'm') + std::to_string(i)});
      metric.gauge.value = i;
      family.metric.push_back(std::move(metric));
    }
    return {family};
  }
};

// How long an authenticated GET /metrics takes, or a very long time when it fails.
std::chrono::milliseconds MetricsLatency(int port, const std::string& password,
                                         std::string* why = nullptr) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(3);
  client.set_read_timeout(3);
  client.set_basic_auth("prometheus", password.c_str());
  const auto start = Clock::now();
  auto answer = client.Get("/metrics");
  if (!answer || answer->status != 200 || answer->body.size() < 1000000) {
    if (why != nullptr) {
      *why += answer ? std::to_string(answer->status) + " " + std::to_string(answer->body.size()) +
                           " bytes; "
                     : httplib::to_string(answer.error()) + "; ";
    }
    return std::chrono::hours(1);
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

ExporterOptions Open() {
  ExporterOptions options;
  options.allow_unauthenticated_changes = true;
  return options;
}

}  // namespace

TEST_CASE("http limits: a body over the limit is refused with 413 before it is read",
          "[exporter][limits]") {
  Running server(Sources(), {}, Open());
  const long rss_before = ResidentKiB();
  RawClient client(server.exporter.port());
  REQUIRE(client.connected());
  REQUIRE(
      client.Send("POST /api/v1/declarations HTTP/1.1\r\nHost: x\r\n"
                  "Content-Type: application/json\r\nContent-Length: 314572800\r\n\r\n"));
  // The client streams its 300 MB; the server has answered and stops reading long before.
  const std::string chunk(1 << 20, '{');
  for (int i = 0; i < 300 && client.Send(chunk); ++i) {
  }
  const std::string answer = client.ReadAll(std::chrono::seconds(5));
  CHECK(answer.rfind("HTTP/1.1 413", 0) == 0);
  CHECK(ResidentKiB() - rss_before < 16 * 1024);
  CHECK(HealthyLatency(server.exporter.port()) < std::chrono::seconds(1));
}

TEST_CASE("http limits: a chunked or compressed body is refused", "[exporter][limits]") {
  Running server(Sources(), {}, Open());
  {
    RawClient client(server.exporter.port());
    REQUIRE(
        client.Send("POST /api/v1/declarations HTTP/1.1\r\nHost: x\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n10000000\r\n"));
    CHECK(client.ReadAll(std::chrono::seconds(5)).rfind("HTTP/1.1 411", 0) == 0);
  }
  {
    RawClient client(server.exporter.port());
    REQUIRE(
        client.Send("POST /api/v1/declarations HTTP/1.1\r\nHost: x\r\n"
                    "Content-Encoding: gzip\r\nContent-Length: 10\r\n\r\n0123456789"));
    CHECK(client.ReadAll(std::chrono::seconds(5)).rfind("HTTP/1.1 415", 0) == 0);
  }
  CHECK(HealthyLatency(server.exporter.port()) < std::chrono::seconds(1));
}

TEST_CASE("http limits: a request line without end is cut off and others are still served",
          "[exporter][limits]") {
  Running server(Sources());
  const long rss_before = ResidentKiB();
  RawClient client(server.exporter.port());
  REQUIRE(client.Send("GET /"));
  const std::string chunk(1 << 20, 'a');
  int sent = 0;
  while (sent < 100 && client.Send(chunk)) ++sent;
  const std::string answer = client.ReadAll(std::chrono::seconds(5));
  CHECK(sent < 100);  // the server stopped reading and closed
  CHECK((answer.empty() || answer.rfind("HTTP/1.1 431", 0) == 0));
  CHECK(ResidentKiB() - rss_before < 16 * 1024);
  CHECK(HealthyLatency(server.exporter.port()) < std::chrono::seconds(1));
}

TEST_CASE("http limits: an oversized header is refused and others are still served",
          "[exporter][limits]") {
  Running server(Sources());
  RawClient client(server.exporter.port());
  REQUIRE(client.Send(
      "GET /-/healthy HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(40 * 1024, 'b') + "\r\n\r\n"));
  const std::string answer = client.ReadAll(std::chrono::seconds(5));
  CHECK(answer.rfind("HTTP/1.1 431", 0) == 0);
  CHECK(client.closed());
  CHECK(HealthyLatency(server.exporter.port()) < std::chrono::seconds(1));
}

TEST_CASE("http limits: ten slow clients do not starve /-/healthy", "[exporter][limits]") {
  Running server(Sources());
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 10; ++i) {
    slow.push_back(std::make_unique<RawClient>(server.exporter.port()));
    REQUIRE(slow.back()->Send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  }
  std::atomic<bool> done{false};
  std::thread dribble([&] {
    while (!done) {
      for (auto& client : slow) client->Send("s");
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
  std::vector<std::chrono::milliseconds> latencies;
  for (int i = 0; i < 5; ++i) latencies.push_back(HealthyLatency(server.exporter.port()));
  done = true;
  dribble.join();
  for (const auto latency : latencies) CHECK(latency < std::chrono::seconds(1));
}

TEST_CASE("http limits: a client that never finishes its head is dropped at the deadline",
          "[exporter][limits]") {
  ExporterOptions options;
  options.limits.head_deadline = std::chrono::milliseconds(500);
  Running server(Sources(), {}, options);
  RawClient client(server.exporter.port());
  REQUIRE(client.Send("GET /metrics HTTP/1.1\r\nHost: x\r\n"));
  const auto start = Clock::now();
  client.ReadAll(std::chrono::seconds(5));
  CHECK(client.closed());
  CHECK(Clock::now() - start < std::chrono::seconds(3));
}

TEST_CASE("http limits: a full pending table drops the oldest connection, not the newest",
          "[exporter][limits]") {
  ExporterOptions options;
  options.limits.max_pending = 4;
  Running server(Sources(), {}, options);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<RawClient>(server.exporter.port()));
    REQUIRE(idle.back()->Send("G"));
  }
  CHECK(HealthyLatency(server.exporter.port()) < std::chrono::seconds(1));
  idle.front()->ReadAll(std::chrono::seconds(2));
  CHECK(idle.front()->closed());
}

TEST_CASE("http limits: requests beyond the queue get 503 while the threads are busy",
          "[exporter][limits]") {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  int blocked = 0;
  Exporter::Sources sources = Sources();
  sources.status = [&](bool) {
    std::unique_lock<std::mutex> lock(mu);
    ++blocked;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return std::string("{}");
  };
  ExporterOptions options;
  options.limits.workers = 1;
  options.limits.max_queued = 1;
  Running server(std::move(sources), {}, options);
  const std::string get_status = "GET /status HTTP/1.1\r\nHost: x\r\n\r\n";
  RawClient running(server.exporter.port());
  REQUIRE(running.Send(get_status));
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return blocked == 1; }));
  }
  RawClient queued(server.exporter.port());
  REQUIRE(queued.Send(get_status));
  // The queue's one place is taken once the third request is refused; retry until then.
  std::string refused;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (refused.empty() && Clock::now() < deadline) {
    RawClient extra(server.exporter.port());
    REQUIRE(extra.Send(get_status));
    refused = extra.ReadAll(std::chrono::milliseconds(500));
  }
  CHECK(refused.rfind("HTTP/1.1 503", 0) == 0);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  CHECK(running.ReadAll(std::chrono::seconds(5)).rfind("HTTP/1.1 200", 0) == 0);
  CHECK(queued.ReadAll(std::chrono::seconds(5)).rfind("HTTP/1.1 200", 0) == 0);
}

TEST_CASE("http limits: without basic auth, changes are refused with 403 saying how to allow",
          "[exporter][auth]") {
  std::vector<std::string> bodies;
  Running server(Sources(&bodies));
  httplib::Client client("127.0.0.1", server.exporter.port());
  auto post = client.Post("/api/v1/declarations", R"({"kind": "cutover"})", "application/json");
  REQUIRE(post);
  CHECK(post->status == 403);
  CHECK(post->body.find("basic_auth_users") != std::string::npos);
  CHECK(post->body.find("--web.allow-unauthenticated-changes") != std::string::npos);
  CHECK(nlohmann::json::parse(post->body).contains("error"));
  auto remove = client.Delete("/api/v1/declarations/abc");
  REQUIRE(remove);
  CHECK(remove->status == 403);
  auto list = client.Get("/api/v1/declarations");
  REQUIRE(list);
  CHECK(list->status == 200);
  CHECK(bodies.empty());
}

TEST_CASE("http limits: the open flag lets changes through, marked unauthenticated",
          "[exporter][auth]") {
  std::vector<std::string> bodies;
  Running server(Sources(&bodies), {}, Open());
  httplib::Client client("127.0.0.1", server.exporter.port());
  auto post = client.Post("/api/v1/declarations",
                          R"({"kind": "cutover", "author": "alice", "reason": "move"})",
                          "application/json");
  REQUIRE(post);
  CHECK(post->status == 201);
  REQUIRE(bodies.size() == 1);
  CHECK(YAML::Load(bodies[0])["author"].as<std::string>() == "unauthenticated:alice");
  CHECK(YAML::Load(bodies[0])["reason"].as<std::string>() == "move");
}

}  // namespace sbd

namespace sbd {

TEST_CASE(
    "http limits: under 100 wrong passwords a second and 50 slow clients, /-/healthy and an "
    "authenticated /metrics answer within 1 s",
    "[exporter][limits][auth][load]") {
  Exporter::Sources sources = Sources();
  sources.metrics = std::make_shared<LargeMetrics>();
  WebConfig web;
  web.basic_auth_users = {{"prometheus", Bcrypt("scrape-secret")}};
  Running server(std::move(sources), web);
  const int port = server.exporter.port();
  // The scraper's password, checked once (one bcrypt) before the attack starts.
  REQUIRE(MetricsLatency(port, "scrape-secret") < std::chrono::seconds(3));
  const std::string auth_header =
      httplib::make_basic_authentication_header("prometheus", "scrape-secret").second;

  // 50 slow clients: heads never finished, bodies announced and never sent (with the right
  // password, so they pass the screening), and readers of the large /metrics that never read.
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 20; ++i) {
    slow.push_back(std::make_unique<RawClient>(port));
    REQUIRE(slow.back()->Send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  }
  for (int i = 0; i < 15; ++i) {
    slow.push_back(std::make_unique<RawClient>(port));
    REQUIRE(slow.back()->Send("GET /-/healthy HTTP/1.1\r\nHost: x\r\nAuthorization: " +
                              auth_header + "\r\nContent-Length: 1000\r\n\r\n"));
  }
  for (int i = 0; i < 15; ++i) {
    slow.push_back(std::make_unique<RawClient>(port, true));
    REQUIRE(slow.back()->Send("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: " + auth_header +
                              "\r\n\r\n"));
  }

  // 100 wrong passwords a second, each new (none is cheap because it was seen before): ten
  // threads, ten requests a second each, none waiting more than 100 ms for its answer.
  std::atomic<bool> done{false};
  std::atomic<int> sent{0};
  std::vector<std::thread> attackers;
  for (int t = 0; t < 10; ++t) {
    attackers.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(t));
      auto next = Clock::now();
      while (!done) {
        next += std::chrono::milliseconds(100);
        RawClient client(port);
        const std::string header = httplib::make_basic_authentication_header(
                                       "prometheus", "guess-" + std::to_string(random()))
                                       .second;
        if (client.Send("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: " + header +
                        "\r\n\r\n")) {
          ++sent;
        }
        client.ReadAll(std::chrono::milliseconds(100));
        std::this_thread::sleep_until(next);
      }
    });
  }
  // The probes, from the second second of the attack on.
  std::vector<std::chrono::milliseconds> healthy, metrics;
  std::string failures;
  const auto attack_start = Clock::now();
  std::this_thread::sleep_until(attack_start + std::chrono::seconds(1));
  while (Clock::now() < attack_start + std::chrono::seconds(5)) {
    // Basic auth covers every path, /-/healthy too.
    healthy.push_back(HealthyLatency(port, "scrape-secret", &failures));
    metrics.push_back(MetricsLatency(port, "scrape-secret", &failures));
  }
  done = true;
  for (auto& a : attackers) a.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - attack_start).count();
  INFO("wrong passwords sent: " << sent << " in " << seconds << " s");
  INFO("failed requests: " << failures);
  CHECK(sent / seconds > 80);
  REQUIRE(healthy.size() >= 3);
  // In milliseconds, so that a failure shows the figure.
  for (const auto latency : healthy) CHECK(latency.count() < 1000);
  for (const auto latency : metrics) CHECK(latency.count() < 1000);
}

}  // namespace sbd
