#include "tests/support/prometheus_sandbox.h"

#include <httplib.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "tests/support/files.h"
#include "tests/support/process.h"

namespace sbd::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A YAML single-quoted scalar.
std::string Quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

struct AlertmanagerTarget {
  std::string scheme;       // "http" or "https"
  std::string host_port;    // "127.0.0.1:9093"
  std::string path_prefix;  // "" or "/prefix"
};

AlertmanagerTarget ParseAlertmanagerUrl(const std::string& url) {
  AlertmanagerTarget t;
  const auto sep = url.find("://");
  if (sep == std::string::npos) throw std::invalid_argument("not a URL: " + url);
  t.scheme = url.substr(0, sep);
  if (t.scheme != "http" && t.scheme != "https") {
    throw std::invalid_argument("not an http(s) URL: " + url);
  }
  const std::string rest = url.substr(sep + 3);
  const auto slash = rest.find('/');
  t.host_port = rest.substr(0, slash);
  if (slash != std::string::npos) t.path_prefix = rest.substr(slash);
  while (!t.path_prefix.empty() && t.path_prefix.back() == '/') t.path_prefix.pop_back();
  if (t.host_port.empty()) throw std::invalid_argument("URL without host: " + url);
  return t;
}

}  // namespace

std::string PrometheusBinary() {
  if (const char* env = std::getenv("SBD_PROMETHEUS"); env != nullptr && *env != '\0') return env;
  return FindExecutable("prometheus");
}

std::string RenderRules(const std::string& source_dir, const std::string& runbook_base_url,
                        const std::string& out_dir, const std::string& job) {
  const std::vector<std::string> argv = {source_dir + "/rules/render-rules",
                                         "--runbook-base-url=" + runbook_base_url,
                                         "--out-dir=" + out_dir, "--job=" + job};
  const CommandResult r = RunCommand(argv, false, seconds(120));
  if (r.exit_code != 0) {
    throw std::runtime_error("RenderRules: " + DescribeCommandRun(argv, r.exit_code, r.output));
  }
  const std::string rules = out_dir + "/splitbrain.rules.yml";
  if (!std::filesystem::is_regular_file(rules)) {
    throw std::runtime_error("RenderRules: " + rules + " was not written:\n" + r.output);
  }
  return rules;
}

PrometheusServer::PrometheusServer(const std::string& dir, std::vector<std::string> scrape_targets,
                                   std::vector<std::string> alertmanager_urls,
                                   std::vector<std::string> rule_files, std::string scrape_interval,
                                   std::string evaluation_interval)
    : dir_(dir),
      config_file_(dir + "/prometheus.yml"),
      log_file_(dir + "/prometheus.log"),
      alertmanagers_(alertmanager_urls.size()) {
  std::filesystem::create_directories(dir_ + "/data");
  WriteConfig(scrape_targets, alertmanager_urls, rule_files, scrape_interval, evaluation_interval);
  if (const std::string promtool = FindExecutable("promtool"); !promtool.empty()) {
    const std::vector<std::string> argv = {promtool, "check", "config", config_file_};
    const CommandResult r = RunCommand(argv, false, seconds(120));
    if (r.exit_code != 0) {
      throw std::runtime_error(
          "PrometheusServer: " + DescribeCommandRun(argv, r.exit_code, r.output) + "\n" +
          config_file_ + ":\n" + ReadFile(config_file_));
    }
  }
  Start();
}

PrometheusServer::~PrometheusServer() {
  try {
    Stop();
  } catch (...) {
  }
}

void PrometheusServer::WriteConfig(const std::vector<std::string>& scrape_targets,
                                   const std::vector<std::string>& alertmanager_urls,
                                   const std::vector<std::string>& rule_files,
                                   const std::string& scrape_interval,
                                   const std::string& evaluation_interval) const {
  std::ostringstream out;
  out << "global:\n"
      << "  scrape_interval: " << scrape_interval << "\n"
      << "  evaluation_interval: " << evaluation_interval << "\n"
      << "scrape_configs:\n"
      << "  - job_name: " << Quoted(kJob) << "\n"
      << "    scrape_interval: " << scrape_interval << "\n"
      << "    static_configs:\n"
      << "      - targets:";
  if (scrape_targets.empty()) {
    out << " []\n";
  } else {
    out << "\n";
    for (const auto& t : scrape_targets) out << "          - " << Quoted(t) << "\n";
  }
  out << "rule_files:";
  if (rule_files.empty()) {
    out << " []\n";
  } else {
    out << "\n";
    for (const auto& f : rule_files) out << "  - " << Quoted(f) << "\n";
  }
  out << "alerting:\n"
      << "  alertmanagers:";
  if (alertmanager_urls.empty()) {
    out << " []\n";
  } else {
    out << "\n";
    for (const auto& url : alertmanager_urls) {
      const AlertmanagerTarget t = ParseAlertmanagerUrl(url);
      out << "    - api_version: v2\n"
          << "      scheme: " << t.scheme << "\n"
          << "      timeout: 5s\n";
      if (!t.path_prefix.empty()) out << "      path_prefix: " << Quoted(t.path_prefix) << "\n";
      out << "      static_configs:\n"
          << "        - targets: [" << Quoted(t.host_port) << "]\n";
    }
  }
  WriteFile(config_file_, out.str(), 0644);
}

void PrometheusServer::Start() {
  const std::string binary = PrometheusBinary();
  if (binary.empty()) {
    throw std::runtime_error("PrometheusServer: prometheus not found (set SBD_PROMETHEUS)");
  }
  BackgroundOptions options;
  options.die_with_parent = true;  // no Prometheus outlives a crashed test binary
  // A free port can be taken between FreeLoopbackPort() and the bind: retry with new ports.
  for (int attempt = 1;; ++attempt) {
    port_ = FreeLoopbackPort();
    const std::vector<std::string> argv = {
        binary, "--config.file=" + config_file_, "--storage.tsdb.path=" + dir_ + "/data",
        "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=debug"};
    WriteFile(log_file_, "### " + FormatArgv(argv) + "\n", 0644, /*append=*/true);
    pid_ = SpawnBackgroundProcess(argv, log_file_, options);

    httplib::Client client("127.0.0.1", port_);
    client.set_connection_timeout(1, 0);
    client.set_read_timeout(2, 0);
    std::string how;
    const StartupOutcome outcome = WaitUntilReady(
        pid_,
        [&] {
          auto res = client.Get("/-/ready");
          return res && res->status == 200;
        },
        milliseconds(60000), milliseconds(50), &how);
    if (outcome == StartupOutcome::kReady) {
      WaitForAlertmanagers();
      return;
    }
    if (outcome == StartupOutcome::kExited) {
      pid_ = -1;
      if (attempt < 3 && LogTail(5).find("address already in use") != std::string::npos) {
        continue;
      }
      throw std::runtime_error("PrometheusServer: prometheus " + how + " during startup:\n" +
                               LogTail());
    }
    Stop();
    throw std::runtime_error("PrometheusServer: /-/ready not 200 within 60s:\n" + LogTail());
  }
}

void PrometheusServer::WaitForAlertmanagers() {
  if (alertmanagers_ == 0) return;
  // Prometheus' discovery manager passes targets on at most every 5 s: until then its notifier
  // knows no Alertmanager and drops every alert it is given (prometheus_notifications_dropped_
  // total), and a dropped firing alert is only re-sent after --rules.alert.resend-delay (1m).
  const std::string series = "prometheus_notifications_alertmanagers_discovered ";
  const bool discovered = ::sbd::testing::WaitFor(
      [&] {
        std::istringstream in(SelfMetrics());
        for (std::string line; std::getline(in, line);) {
          if (line.rfind(series, 0) == 0) {
            return std::stod(line.substr(series.size())) >= static_cast<double>(alertmanagers_);
          }
        }
        return false;
      },
      milliseconds(30000), milliseconds(100));
  if (!discovered) {
    Stop();
    throw std::runtime_error("PrometheusServer: its notifier did not discover " +
                             std::to_string(alertmanagers_) + " Alertmanager(s) within 30s:\n" +
                             LogTail());
  }
}

void PrometheusServer::Stop() {
  if (pid_ <= 0) return;
  StopChildProcess(pid_, SIGTERM, milliseconds(10000), /*whole_group=*/true);
  pid_ = -1;
}

nlohmann::json PrometheusServer::GetApi(const std::string& path, const std::string& query) const {
  httplib::Client client("127.0.0.1", port_);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(10, 0);
  httplib::Params params;
  if (!query.empty()) params.emplace("query", query);
  auto res = client.Get(path, params, httplib::Headers{});
  const std::string what = "GET " + url() + path + (query.empty() ? "" : "?query=" + query);
  if (!res) throw std::runtime_error(what + ": " + httplib::to_string(res.error()));
  const nlohmann::json body = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status != 200 || body.is_discarded() || body.value("status", "") != "success") {
    throw std::runtime_error(what + ": HTTP " + std::to_string(res->status) + ": " + res->body);
  }
  return body.at("data");
}

nlohmann::json PrometheusServer::Query(const std::string& promql) const {
  return GetApi("/api/v1/query", promql);
}

nlohmann::json PrometheusServer::Alerts() const {
  return GetApi("/api/v1/alerts", "").at("alerts");
}

nlohmann::json PrometheusServer::Rules() const { return GetApi("/api/v1/rules", "").at("groups"); }

double PrometheusServer::RuleForSeconds(const std::string& alertname) const {
  for (const auto& group : Rules()) {
    for (const auto& rule : group.at("rules")) {
      if (rule.value("type", "") == "alerting" && rule.value("name", "") == alertname) {
        return rule.value("duration", 0.0);
      }
    }
  }
  throw std::runtime_error("PrometheusServer: no alerting rule " + alertname + " loaded");
}

std::string PrometheusServer::SelfMetrics() const {
  httplib::Client client("127.0.0.1", port_);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(10, 0);
  auto res = client.Get("/metrics");
  return res && res->status == 200 ? res->body : "";
}

std::string PrometheusServer::LogTail(int lines) const { return Tail(log_file_, lines); }

}  // namespace sbd::testing
