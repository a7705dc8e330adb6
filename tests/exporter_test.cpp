// The exporter on a real loopback listener: TLS and basic auth from --web.config.file, and
// strict parsing of that file.
#include "detector/output/exporter.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>

#include "detector/output/metrics.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/bcrypt.h"
#include "tests/support/detector_process.h"

namespace sbd {
namespace {

using testing::Bcrypt;

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

// The median time of `tries` calls of `run`.
template <typename Run>
std::chrono::nanoseconds MedianTime(int tries, Run run) {
  std::vector<std::chrono::nanoseconds> times;
  for (int i = 0; i < tries; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::steady_clock::now() - start);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::string BasicHeader(const std::string& user, const std::string& password) {
  return httplib::make_basic_authentication_header(user, password).second;
}

std::vector<std::string> WebErrors(const std::string& dir, const std::string& yaml) {
  const std::string path = testing::WriteFile(dir, "web.yml", yaml);
  auto web = LoadWebConfig(path);
  REQUIRE(std::holds_alternative<std::vector<std::string>>(web));
  auto errors = std::get<std::vector<std::string>>(web);
  for (auto& e : errors) {
    REQUIRE(e.rfind(path + ":", 0) == 0);
    e = e.substr(path.size() + 1);
  }
  return errors;
}

}  // namespace

TEST_CASE("exporter: TLS with basic auth refuses strangers and serves the right password",
          "[exporter]") {
  testing::TempDir dir("sbd-exporter");
  const auto [cert, key] = testing::MakeLoopbackCertificate(dir.path());
  const std::string web_file = testing::WriteFile(
      dir.path(), "web.yml",
      "tls_server_config:\n  cert_file: " + cert + "\n  key_file: " + key +
          "\nbasic_auth_users:\n  prometheus: " + Bcrypt("scrape-secret") + "\n");
  auto web = LoadWebConfig(web_file);
  REQUIRE(std::holds_alternative<WebConfig>(web));
  Exporter exporter(Sources(), std::get<WebConfig>(web));
  std::string error;
  REQUIRE(exporter.Bind("127.0.0.1:0", &error));
  exporter.Start();

  httplib::SSLClient client("127.0.0.1", exporter.port());
  client.set_ca_cert_path(cert.c_str());
  client.enable_server_certificate_verification(true);
  client.set_connection_timeout(2);
  auto anonymous = client.Get("/metrics");
  REQUIRE(anonymous);
  CHECK(anonymous->status == 401);
  client.set_basic_auth("prometheus", "wrong");
  auto wrong = client.Get("/metrics");
  REQUIRE(wrong);
  CHECK(wrong->status == 401);
  client.set_basic_auth("prometheus", "scrape-secret");
  auto right = client.Get("/metrics");
  REQUIRE(right);
  CHECK(right->status == 200);
  CHECK(right->body.find("splitbrain_build_info{") != std::string::npos);

  // Plain HTTP to the TLS port gets nothing useful.
  httplib::Client plain("127.0.0.1", exporter.port());
  plain.set_connection_timeout(2);
  plain.set_read_timeout(2);
  auto cleartext = plain.Get("/metrics");
  CHECK((!cleartext || cleartext->status != 200));
  exporter.Stop();
}

TEST_CASE("exporter: clients that never finish a TLS handshake do not hold up others",
          "[exporter][limits]") {
  testing::TempDir dir("sbd-exporter");
  const auto [cert, key] = testing::MakeLoopbackCertificate(dir.path());
  WebConfig web;
  web.cert_file = cert;
  web.key_file = key;
  ExporterOptions options;
  options.limits.head_deadline = std::chrono::milliseconds(1500);
  Exporter exporter(Sources(), web, options);
  std::string error;
  REQUIRE(exporter.Bind("127.0.0.1:0", &error));
  exporter.Start();
  // Ten connections that send half a ClientHello and then nothing.
  std::vector<int> sockets;
  for (int i = 0; i < 10; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(exporter.port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    REQUIRE(send(fd, "\x16\x03\x01\x02\x00\x01", 6, MSG_NOSIGNAL) == 6);
    sockets.push_back(fd);
  }
  httplib::SSLClient client("127.0.0.1", exporter.port());
  client.set_ca_cert_path(cert.c_str());
  client.enable_server_certificate_verification(true);
  client.set_connection_timeout(2);
  client.set_read_timeout(2);
  const auto start = std::chrono::steady_clock::now();
  auto healthy = client.Get("/-/healthy");
  REQUIRE(healthy);
  CHECK(healthy->status == 200);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  // Past the head deadline the server has dropped them.
  for (const int fd : sockets) {
    pollfd p{fd, POLLIN, 0};
    char byte;
    CHECK(poll(&p, 1, 5000) == 1);
    CHECK(recv(fd, &byte, 1, 0) <= 0);
    close(fd);
  }
  exporter.Stop();
}

TEST_CASE("exporter: a bad web config names file, line, column and key", "[exporter]") {
  testing::TempDir dir("sbd-exporter");
  const std::string path = testing::WriteFile(
      dir.path(), "web.yml",
      "tls_server_config:\n  cert_file: /x.pem\n  colour: blue\nbasic_auth_users:\n  bob: plain\n");
  auto web = LoadWebConfig(path);
  REQUIRE(std::holds_alternative<std::vector<std::string>>(web));
  const auto& errors = std::get<std::vector<std::string>>(web);
  CHECK(errors == std::vector<std::string>{
                      path + ":3:3: tls_server_config.colour: unknown key",
                      path + ":2:3: tls_server_config: cert_file and key_file go together",
                      path + ":5:8: basic_auth_users.bob: expected a bcrypt hash"});
}

TEST_CASE("exporter: a malformed web config is a list of errors, never an exception",
          "[exporter]") {
  testing::TempDir dir("sbd-exporter");
  CHECK(WebErrors(dir.path(), "basic_auth_users: {[a]: b}\n") ==
        std::vector<std::string>{"1:20: basic_auth_users: expected a user name without ':'"});
  CHECK(WebErrors(dir.path(), "[x]: 1\n") ==
        std::vector<std::string>{"1:1: expected a string key"});
  CHECK(WebErrors(dir.path(), "tls_server_config:\n  - cert_file: a\n") ==
        std::vector<std::string>{"2:3: tls_server_config: expected a mapping"});
  CHECK(WebErrors(dir.path(), "tls_server_config:\n  {a: b}: c\n  cert_file: [x]\n") ==
        std::vector<std::string>{"2:3: tls_server_config: expected a string key",
                                 "3:14: tls_server_config.cert_file: expected a file name"});
  CHECK(WebErrors(dir.path(), "basic_auth_users:\n  a:b: " + Bcrypt("x") + "\n  c: {d: e}\n") ==
        std::vector<std::string>{"2:3: basic_auth_users: expected a user name without ':'",
                                 "3:6: basic_auth_users.c: expected a bcrypt hash"});
  CHECK(WebErrors(dir.path(), "- 1\n") == std::vector<std::string>{"1:1: expected a mapping"});
  CHECK(WebErrors(dir.path(), "a: [\n") ==
        std::vector<std::string>{"2:1: end of sequence flow not found"});
}

TEST_CASE("exporter: with basic auth, a declaration's author is the authenticated user",
          "[exporter][auth]") {
  testing::TempDir dir("sbd-exporter");
  WebConfig web;
  web.basic_auth_users = {{"carol", Bcrypt("pw")}};
  std::vector<std::string> bodies;
  Exporter exporter(Sources(&bodies), web);
  std::string error;
  REQUIRE(exporter.Bind("127.0.0.1:0", &error));
  exporter.Start();
  httplib::Client client("127.0.0.1", exporter.port());
  const std::string body = R"({"kind": "cutover", "author": "mallory", "reason": "r"})";
  auto anonymous = client.Post("/api/v1/declarations", body, "application/json");
  REQUIRE(anonymous);
  CHECK(anonymous->status == 401);
  client.set_basic_auth("carol", "pw");
  auto post = client.Post("/api/v1/declarations", body, "application/json");
  REQUIRE(post);
  CHECK(post->status == 201);
  REQUIRE(bodies.size() == 1);
  CHECK(YAML::Load(bodies[0])["author"].as<std::string>() == "carol");
  CHECK(YAML::Load(bodies[0])["kind"].as<std::string>() == "cutover");
  // Without author in the body, it is added.
  CHECK(BodyWithAuthor("kind: cutover\n", std::string("carol")).find("author: carol") !=
        std::string::npos);
  CHECK(BodyWithAuthor("[1, 2]", std::string("carol")) == "[1, 2]");
  CHECK(BodyWithAuthor("{", std::string("carol")) == "{");
  exporter.Stop();
}

TEST_CASE("exporter: /api/v1/incidents takes its query and the same basic auth as /status",
          "[exporter][auth]") {
  WebConfig web;
  web.basic_auth_users = {{"carol", Bcrypt("pw")}};
  Exporter::Sources sources = Sources();
  std::multimap<std::string, std::string> seen;
  sources.list_incidents = [&seen](const std::multimap<std::string, std::string>& query) {
    seen = query;
    return Exporter::Sources::Answer{query.count("limit") ? 400 : 200, "{\"events\": []}"};
  };
  Exporter exporter(std::move(sources), web);
  std::string error;
  REQUIRE(exporter.Bind("127.0.0.1:0", &error));
  exporter.Start();
  httplib::Client client("127.0.0.1", exporter.port());
  auto anonymous = client.Get("/api/v1/incidents");
  REQUIRE(anonymous);
  CHECK(anonymous->status == 401);
  CHECK(seen.empty());
  client.set_basic_auth("carol", "pw");
  auto ok = client.Get("/api/v1/incidents?cluster=orders&since=2026-11-30T06%3A00%3A00Z");
  REQUIRE(ok);
  CHECK(ok->status == 200);
  CHECK(ok->get_header_value("Content-Type") == "application/json");
  CHECK(seen == std::multimap<std::string, std::string>{{"cluster", "orders"},
                                                        {"since", "2026-11-30T06:00:00Z"}});
  auto refused = client.Get("/api/v1/incidents?limit=x");
  REQUIRE(refused);
  CHECK(refused->status == 400);
  exporter.Stop();
}

TEST_CASE("exporter: an unknown user costs as much as a known one with a wrong password",
          "[exporter][auth]") {
  BasicAuth auth({{"known", Bcrypt("right")}});
  // A new password each time: a repeated wrong one is remembered and costs no bcrypt.
  int attempt = 0;
  const auto known_wrong = MedianTime(
      7, [&] { CHECK(!auth.Verify(BasicHeader("known", "wrong" + std::to_string(++attempt)))); });
  const auto unknown = MedianTime(
      7, [&] { CHECK(!auth.Verify(BasicHeader("nobody", "x" + std::to_string(++attempt)))); });
  INFO("known user, wrong password: " << known_wrong.count()
                                      << " ns; unknown user: " << unknown.count() << " ns");
  CHECK(unknown * 3 > known_wrong);
  CHECK(known_wrong * 3 > unknown);
}

TEST_CASE("exporter: a right password is remembered, so a scrape does not pay bcrypt each time",
          "[exporter][auth]") {
  BasicAuth auth({{"known", Bcrypt("right")}});
  const auto first = MedianTime(1, [&] { CHECK(auth.Verify(BasicHeader("known", "right"))); });
  const auto again = MedianTime(5, [&] { CHECK(auth.Verify(BasicHeader("known", "right"))); });
  INFO("first: " << first.count() << " ns; again: " << again.count() << " ns");
  CHECK(again * 20 < first);
  CHECK(!auth.Verify(BasicHeader("known", "wrong")));
}

TEST_CASE("exporter: a source that keeps failing is shed while bcrypt is busy, others wait",
          "[exporter][auth]") {
  BasicAuth auth({{"known", Bcrypt("right")}});
  // A wrong password repeated costs no bcrypt the second time: measured against the first
  // check, which paid one, so that a loaded machine slows both alike.
  const auto first_start = std::chrono::steady_clock::now();
  CHECK_FALSE(auth.Check(BasicHeader("known", "guess"), "10.0.0.9").user);
  const auto first = std::chrono::steady_clock::now() - first_start;
  const auto start = std::chrono::steady_clock::now();
  const AuthOutcome again = auth.Check(BasicHeader("known", "guess"), "10.0.0.9");
  const auto repeat = std::chrono::steady_clock::now() - start;
  CHECK_FALSE(again.user);
  CHECK_FALSE(again.shed);
  INFO("first: " << first.count() << " ns; repeated: " << repeat.count() << " ns");
  CHECK(repeat * 20 < first);
  // While bcrypt is busy, the failing source is shed at once; a clean one waits and passes.
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    for (int i = 0; !stop; ++i) auth.Check(BasicHeader("known", "w" + std::to_string(i)), "");
  });
  int shed = 0;
  for (int i = 0; i < 20 && shed == 0; ++i) {
    shed += auth.Check(BasicHeader("known", "x" + std::to_string(i)), "10.0.0.9").shed ? 1 : 0;
  }
  CHECK(shed == 1);
  const AuthOutcome clean = auth.Check(BasicHeader("known", "right"), "10.0.0.7");
  stop = true;
  busy.join();
  CHECK(clean.user == std::optional<std::string>("known"));
}

TEST_CASE("exporter: a reloaded web config swaps users; an invalid one keeps the last good",
          "[exporter][auth]") {
  testing::TempDir dir("sbd-exporter");
  const std::string path =
      testing::WriteFile(dir.path(), "web.yml", "basic_auth_users:\n  ann: " + Bcrypt("a") + "\n");
  auto web = LoadWebConfig(path);
  REQUIRE(std::holds_alternative<WebConfig>(web));
  Exporter exporter(Sources(), std::get<WebConfig>(web));
  std::string error;
  REQUIRE(exporter.Bind("127.0.0.1:0", &error));
  exporter.Start();
  auto status = [&](const std::string& user, const std::string& password) {
    httplib::Client client("127.0.0.1", exporter.port());
    client.set_basic_auth(user.c_str(), password.c_str());
    auto answer = client.Get("/metrics");
    return answer ? answer->status : -1;
  };
  auto reload_gauge = [&] {
    httplib::Client client("127.0.0.1", exporter.port());
    client.set_basic_auth("bob", "b");
    auto answer = client.Get("/metrics");
    return answer
               ? testing::MetricValue(answer->body, "splitbrain_web_config_last_reload_successful")
               : -1;
  };
  CHECK(status("ann", "a") == 200);
  testing::WriteFile(dir.path(), "web.yml", "basic_auth_users:\n  bob: " + Bcrypt("b") + "\n");
  CHECK(exporter.ReloadWebConfig(path));
  CHECK(status("ann", "a") == 401);
  CHECK(status("bob", "b") == 200);
  CHECK(reload_gauge() == 1);
  testing::WriteFile(dir.path(), "web.yml", "basic_auth_users: [oops]\n");
  CHECK(!exporter.ReloadWebConfig(path));
  CHECK(status("bob", "b") == 200);
  CHECK(reload_gauge() == 0);
  // Switching to TLS needs a restart: users still apply, the listener stays plain HTTP.
  const auto [cert, key] = testing::MakeLoopbackCertificate(dir.path());
  testing::WriteFile(dir.path(), "web.yml",
                     "tls_server_config:\n  cert_file: " + cert + "\n  key_file: " + key +
                         "\nbasic_auth_users:\n  bob: " + Bcrypt("b") + "\n");
  CHECK(!exporter.ReloadWebConfig(path));
  CHECK(status("bob", "b") == 200);
  exporter.Stop();
}

}  // namespace sbd
