// The status page in a real browser: Debian's chromium, headless, reads GET / from the real
// detector binary watching real PostgreSQL 15 servers through a split brain. Chromium missing
// is a failure, not a skip: CI installs it (scripts/install-deps).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/detector_process.h"
#include "tests/support/html_tidy.h"
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

// How long `cluster` has had two writable members, as /status's write window says; 0 when it
// says nothing.
double DoubleWriteSeconds(int port, const std::string& cluster) {
  const auto status = nlohmann::json::parse(HttpGet(port, "/status"), nullptr, false);
  if (status.is_discarded()) return 0;
  for (const auto& c : status.value("clusters", nlohmann::json::array())) {
    if (c.value("name", "") != cluster) continue;
    const auto window = c.value("write_window", nlohmann::json::object());
    return window.is_object() ? window.value("double_write_seconds", 0.0) : 0.0;
  }
  return 0;
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

// The page as served at `path`, kept as an artefact `name`, passes the offline check
// (well-formed, no script, titled SVGs) and Debian's HTML Tidy (see TidyHtml).
void CheckServedHtml(int port, const std::string& path, const std::string& name) {
  const std::string served = WriteFile(SBD_ARTEFACT_DIR, name, HttpGet(port, path));
  auto check = RunCommand({SBD_SOURCE_DIR "/tests/check-status-html", served});
  INFO(check.output);
  CHECK(check.exit_code == 0);
  const auto tidied = sbd::testing::TidyHtml(served, path == "/");
  INFO(served << ":\n" << tidied.output);
  CHECK(tidied.exit_code == 0);  // 1: HTML warnings, 2: errors, 127: no tidy
  CHECK(tidied.findings.empty());
  // The accessibility checks ran: their reminder for any <style> is there, excluded.
  CHECK(tidied.output.find("(STYLESHEETS_REQUIRE_TESTING_STYLE_ELEMENT)") != std::string::npos);
}

// The text of the chart's list item that starts with `start`, "" when there is none.
std::string ListItem(const std::string& page, const std::string& start) {
  const size_t from = page.find("<li>" + start);
  if (from == std::string::npos) return "";
  return page.substr(from, page.find("</li>", from) - from);
}

// A full-page PNG of `url`, kept as an artefact.
void Screenshot(const std::string& chromium, const std::string& profile, const std::string& url,
                const std::string& shot) {
  std::remove(shot.c_str());
  auto screenshot = RunCommand(
      Chromium(chromium, profile, {"--screenshot=" + shot, "--window-size=1200,900", url}), false,
      seconds(120));
  INFO(screenshot.output);
  REQUIRE(screenshot.exit_code == 0);
  const std::string png = ReadBinary(shot);
  CHECK(png.rfind("\x89PNG\r\n\x1a\n", 0) == 0);
  CHECK(png.size() > 20000);  // a rendered page, not a blank one
}

}  // namespace

TEST_CASE(
    "status page browser: chromium shows a healthy state, then a split brain with its "
    "members and the incident's timeline",
    "[browser]") {
  const std::string chromium = sbd::testing::FindExecutable("chromium");
  INFO("Debian's chromium is needed (apt-get install chromium; scripts/install-deps has it)");
  REQUIRE_FALSE(chromium.empty());

  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  // The grant docs/kinds/postgres.md names, so that the page shows the fork point and the WAL since
  // it.
  a.Query("GRANT EXECUTE ON FUNCTION pg_read_file(text) TO splitbrain");
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
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  sbd::testing::TempDir work("sbd-chromium");

  REQUIRE(WaitFor([&] { return VerdictOf(port, "orders") == "healthy"; }, seconds(20)));
  CheckServedHtml(port, "/", "status-page-healthy.html");
  CheckServedHtml(port, "/?refresh=off", "status-page-healthy-still.html");
  auto healthy_dom =
      RunCommand(Chromium(chromium, work.path() + "/profile-healthy-dom", {"--dump-dom", url}),
                 false, seconds(120));
  REQUIRE(healthy_dom.exit_code == 0);
  CHECK(healthy_dom.output.find("<h2>Healthy (2)</h2>") != std::string::npos);
  CHECK(healthy_dom.output.find(">pg-a</th>") != std::string::npos);
  CHECK(healthy_dom.output.find(">pg-c</th>") != std::string::npos);
  CHECK(healthy_dom.output.find("Problems") == std::string::npos);
  CHECK(healthy_dom.output.find("Incident timeline") == std::string::npos);
  Screenshot(chromium, work.path() + "/profile-healthy", url,
             SBD_ARTEFACT_DIR "/status-page-healthy.png");

  b.Promote();
  // Writes on the old primary, which nobody else has: the data at risk the page shows.
  a.Query(
      "CREATE TABLE lost AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 20000) g");
  INFO(detector.Log());
  REQUIRE(WaitFor([&] { return VerdictOf(port, "orders") == "split_brain"; }, seconds(20)));
  REQUIRE(VerdictOf(port, "billing") == "healthy");
  // The chart is drawn from the incident log once it holds the verdict change and pg-b's
  // promotion (the round after /status shows them at the latest).
  // A few seconds into the split brain, so that the chart and the screenshot show a window.
  REQUIRE(WaitFor([&] { return DoubleWriteSeconds(port, "orders") >= 8; }, seconds(30)));
  std::string page;
  REQUIRE(WaitFor(
      [&] {
        page = HttpGet(port, "/");
        const std::string pg_b = ListItem(page, "pg-b: ");
        return page.find(">onset</text>") != std::string::npos &&
               pg_b.find(" standby ") != std::string::npos &&
               pg_b.find(" writable ") != std::string::npos;
      },
      seconds(10)));
  CheckServedHtml(port, "/", "status-page.html");
  CheckServedHtml(port, "/?refresh=off", "status-page-still.html");

  auto dom = RunCommand(Chromium(chromium, work.path() + "/profile-dom", {"--dump-dom", url}),
                        false, seconds(120));
  INFO(dom.output.substr(0, 4000));
  REQUIRE(dom.exit_code == 0);
  CHECK(dom.output.find("<code class=\"verdict\">split_brain</code>") != std::string::npos);
  CHECK(dom.output.find("Split brain</span>") != std::string::npos);
  CHECK(dom.output.find("Write window: fork at ") != std::string::npos);
  CHECK(dom.output.find(">pg-a</th>") != std::string::npos);
  CHECK(dom.output.find(">pg-b</th>") != std::string::npos);
  // The incident's timeline: one lane per member, the onset, and the intervals as text.
  CHECK(dom.output.find("Who was writable when in orders</title>") != std::string::npos);
  CHECK(dom.output.find(">pg-a</text>") != std::string::npos);
  CHECK(dom.output.find(">pg-b</text>") != std::string::npos);
  CHECK(dom.output.find("fill=\"#c9302c\"") != std::string::npos);  // writable lanes
  CHECK(dom.output.find("fill=\"#5a0a08\"") != std::string::npos);  // two writable at once
  CHECK(ListItem(dom.output, "pg-a: ").find(" writable ") != std::string::npos);
  // The chart's double-write stretch, from the log's rounds, agrees with /status's window.
  const std::string both = ListItem(dom.output, "Two or more writable: ");
  INFO(both);
  const size_t open_paren = both.rfind('(');
  REQUIRE(open_paren != std::string::npos);
  const int charted = std::atoi(both.c_str() + open_paren + 1);
  CHECK(charted >= 7);
  CHECK(charted <= DoubleWriteSeconds(port, "orders") + 2);
  // The healthy cluster is folded below the problem.
  const size_t orders = dom.output.find("<span class=\"name\">orders</span>");
  const size_t billing = dom.output.find("<span class=\"name\">billing</span>");
  CHECK(orders < billing);
  const size_t folded = dom.output.rfind("<details>", billing);
  CHECK(folded != std::string::npos);
  CHECK(folded > orders);
  // The page's own policy blocks nothing it needs (chromium logs every violation).
  CHECK(dom.output.find("Content Security Policy") == std::string::npos);

  Screenshot(chromium, work.path() + "/profile-shot", url, SBD_ARTEFACT_DIR "/status-page.png");
}

}  // namespace sbd
