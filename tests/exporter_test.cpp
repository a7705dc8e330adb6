// The exporter on a real loopback listener: TLS and basic auth from --web.config.file, and
// strict parsing of that file.
#include "detector/exporter.h"

#include <crypt.h>
#include <httplib.h>

#include <catch2/catch.hpp>

#include "detector/metrics.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"

namespace sbd {
namespace {

std::string Bcrypt(const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  REQUIRE(crypt_gensalt_rn("$2b$", 10, nullptr, 0, salt, sizeof(salt)) != nullptr);
  crypt_data data{};
  const char* hash = crypt_r(password.c_str(), salt, &data);
  REQUIRE(hash != nullptr);
  return hash;
}

Exporter::Sources Sources() {
  Exporter::Sources sources;
  sources.metrics =
      std::make_shared<DetectorCollector>([] { return std::vector<ClusterSnapshot>{}; }, nullptr);
  sources.status = [](bool) { return std::string("{}"); };
  sources.ready = [] { return true; };
  return sources;
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

}  // namespace sbd
