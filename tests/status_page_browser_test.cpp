// The status page in a real browser: Debian's chromium, headless, reads GET / from the real
// detector binary watching real PostgreSQL 15 servers through a split brain. Chromium missing
// is a failure, not a skip: CI installs it (scripts/install-deps).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/detector_process.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

using sbd::testing::DetectorProcess;
using sbd::testing::HttpGet;
using sbd::testing::PgInstance;
using sbd::testing::PgSandbox;
using sbd::testing::RunCommand;
using sbd::testing::WaitFor;
using sbd::testing::WriteFile;
using std::chrono::seconds;

std::string ClusterYaml(const PgSandbox& sandbox, const std::string& name,
                        const std::vector<const PgInstance*>& members) {
  std::ostringstream out;
  out << "  - name: " << name << "\n    ttl: 3s\n    probe_interval: 500ms\n"
      << "    probe_timeout: 400ms\n    members:\n";
  for (const PgInstance* m : members) {
    out << "      - name: " << m->name() << "\n        dsn: \"" << m->MonitorDsn()
        << "\"\n        password_file: " << sandbox.PasswordFile() << "\n";
  }
  return out.str();
}

// The verdict /status gives `cluster`, "" while it has none.
std::string VerdictOf(int port, const std::string& cluster) {
  const auto status = nlohmann::json::parse(HttpGet(port, "/status"), nullptr, false);
  if (status.is_discarded()) return "";
  for (const auto& c : status.value("clusters", nlohmann::json::array())) {
    if (c.value("name", "") == cluster) return c.value("verdict", "");
  }
  return "";
}

// Headless chromium with a fresh profile, nothing fetched but the page, console to stderr.
std::vector<std::string> Chromium(const std::string& binary, const std::string& profile,
                                  std::vector<std::string> args) {
  std::vector<std::string> argv = {binary,
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--disable-quic",
                                   "--no-first-run",
                                   "--disable-background-networking",
                                   "--disable-component-update",
                                   "--disable-sync",
                                   "--enable-logging=stderr",
                                   "--user-data-dir=" + profile};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string ReadBinary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("status page browser: chromium shows a split brain with its members and a timeline",
          "[browser]") {
  const std::string chromium = sbd::testing::FindExecutable("chromium");
  INFO("Debian's chromium is needed (apt-get install chromium; scripts/install-deps has it)");
  REQUIRE_FALSE(chromium.empty());

  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  PgInstance& c = sandbox.StartPrimary("pg-c");
  const std::string config = WriteFile(sandbox.root(), "detector.yml",
                                       "clusters:\n" + ClusterYaml(sandbox, "orders", {&a, &b}) +
                                           ClusterYaml(sandbox, "billing", {&c}));
  const int port = sbd::testing::FreeLoopbackPort();
  DetectorProcess detector(
      SBD_BINARY,
      {"--config.file=" + config, "--web.listen-address=127.0.0.1:" + std::to_string(port)},
      sandbox.root() + "/detector.log");
  REQUIRE(WaitFor([&] { return HttpGet(port, "/-/ready") == "Ready\n"; }, seconds(20)));
  b.Promote();
  INFO(detector.Log());
  REQUIRE(WaitFor([&] { return VerdictOf(port, "orders") == "split_brain"; }, seconds(20)));
  REQUIRE(VerdictOf(port, "billing") == "healthy");

  // The served page passes the offline HTML check (well-formed, no script, titled SVGs).
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  sbd::testing::TempDir work("sbd-chromium");
  const std::string served = WriteFile(work.path(), "served.html", HttpGet(port, "/"));
  auto check = RunCommand({SBD_SOURCE_DIR "/tests/check-status-html", served});
  INFO(check.output);
  CHECK(check.exit_code == 0);

  auto dom = RunCommand(Chromium(chromium, work.path() + "/profile-dom", {"--dump-dom", url}),
                        false, seconds(120));
  INFO(dom.output.substr(0, 4000));
  REQUIRE(dom.exit_code == 0);
  CHECK(dom.output.find("<code class=\"verdict\">split_brain</code>") != std::string::npos);
  CHECK(dom.output.find("Split brain</span>") != std::string::npos);
  CHECK(dom.output.find(">pg-a</th>") != std::string::npos);
  CHECK(dom.output.find(">pg-b</th>") != std::string::npos);
  CHECK(dom.output.find("<svg") != std::string::npos);
  CHECK(dom.output.find("fill=\"#c9302c\"") != std::string::npos);  // two writable streaks
  // The healthy cluster is folded below the problem.
  const size_t orders = dom.output.find("<span class=\"name\">orders</span>");
  const size_t billing = dom.output.find("<span class=\"name\">billing</span>");
  CHECK(orders < billing);
  const size_t folded = dom.output.rfind("<details>", billing);
  CHECK(folded != std::string::npos);
  CHECK(folded > orders);
  // The page's own policy blocks nothing it needs (chromium logs every violation).
  CHECK(dom.output.find("Content Security Policy") == std::string::npos);

  const std::string shot = SBD_ARTEFACT_DIR "/status-page.png";
  std::remove(shot.c_str());
  auto screenshot = RunCommand(Chromium(chromium, work.path() + "/profile-shot",
                                        {"--screenshot=" + shot, "--window-size=1200,900", url}),
                               false, seconds(120));
  INFO(screenshot.output);
  REQUIRE(screenshot.exit_code == 0);
  const std::string png = ReadBinary(shot);
  CHECK(png.rfind("\x89PNG\r\n\x1a\n", 0) == 0);
  CHECK(png.size() > 20000);  // a rendered page, not a blank one
}

}  // namespace sbd
