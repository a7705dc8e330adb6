// A throw-away Prometheus 2.x server for integration tests: scrapes the detector(s), evaluates
// the rendered rules of rules/ and sends their alerts to the test's Alertmanager(s), so that the
// backstop path (detector -> Prometheus rules -> Alertmanager) runs for real.
//
// Everything listens on 127.0.0.1 only, on free ports.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sbd::testing {

/// The Prometheus binary: $SBD_PROMETHEUS if set, else `prometheus` found by FindExecutable
/// (Debian: /usr/bin/prometheus), else "".
std::string PrometheusBinary();

/// Runs `<source_dir>/rules/render-rules --runbook-base-url=URL --out-dir=DIR --job=JOB` (which
/// also runs `promtool check rules` on the result) and returns the path of the rendered
/// DIR/splitbrain.rules.yml. Throws std::runtime_error with the script's output on failure.
std::string RenderRules(const std::string& source_dir, const std::string& runbook_base_url,
                        const std::string& out_dir, const std::string& job = "splitbrain-detector");

/// One Prometheus on loopback. Writes `dir`/prometheus.yml:
///   global: scrape_interval / evaluation_interval as given (scrape timeout defaults to at most
///           the interval), no external_labels (the detector under test has none either);
///   scrape_configs: job "splitbrain-detector" with `scrape_targets` ("127.0.0.1:PORT");
///   rule_files: `rule_files` (absolute paths);
///   alerting.alertmanagers: one static_config (api v2) per `alertmanager_urls` entry
///           ("http://127.0.0.1:PORT", an optional path becomes its path_prefix).
/// Checks it with `promtool check config` when promtool is installed, then starts
/// `prometheus --config.file --storage.tsdb.path=<dir>/data --web.listen-address=127.0.0.1:FREE`
/// (SpawnBackgroundProcess: own process group, stdout/stderr appended to `dir`/prometheus.log,
/// SIGTERMed should the test binary die; start it from the main thread), waits (deadline
/// 60 s) until /-/ready answers 200, then (deadline 30 s) until its notifier has discovered every
/// Alertmanager (prometheus_notifications_alertmanagers_discovered): Prometheus passes discovered
/// targets on at most every 5 s and drops the alerts that fire before, re-sending a dropped
/// firing alert only after --rules.alert.resend-delay (1m). So rule alerts that fire after the
/// constructor returns reach the Alertmanagers at once, while SplitBrainWatchdog, which fires at
/// the first evaluation, is usually dropped and first delivered about a minute later.
/// Throws std::runtime_error with the log tail on failure. The destructor stops it. Not
/// thread-safe; non-copyable.
class PrometheusServer {
 public:
  static constexpr const char* kJob = "splitbrain-detector";

  PrometheusServer(const std::string& dir, std::vector<std::string> scrape_targets,
                   std::vector<std::string> alertmanager_urls, std::vector<std::string> rule_files,
                   std::string scrape_interval = "1s", std::string evaluation_interval = "1s");
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  /// "http://127.0.0.1:P" (stays valid after Stop(): then nothing listens there).
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  const std::string& config_file() const { return config_file_; }

  /// GET /api/v1/query?query=`promql` (instant query, now). Returns the response's `data`
  /// object ({"resultType": ..., "result": [...]}). Throws std::runtime_error when the request
  /// fails or Prometheus answers with an error (e.g. a bad expression).
  nlohmann::json Query(const std::string& promql) const;
  /// GET /api/v1/alerts: the `data.alerts` array (every pending and firing rule alert, each with
  /// labels, annotations, state, activeAt, value). Throws std::runtime_error on failure.
  nlohmann::json Alerts() const;
  /// GET /api/v1/rules: the `data.groups` array (each rule with name, query, duration in seconds,
  /// health, lastError). Throws std::runtime_error on failure.
  nlohmann::json Rules() const;
  /// The `for` duration, in seconds, of the loaded alerting rule `alertname`. Throws
  /// std::runtime_error if no such rule is loaded.
  double RuleForSeconds(const std::string& alertname) const;
  /// GET /metrics of Prometheus itself (e.g. prometheus_notifications_sent_total), "" on error.
  std::string SelfMetrics() const;

  /// SIGTERM, then SIGKILL after 10 s; waits until the process is gone. Idempotent.
  void Stop();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  /// The last `lines` lines of prometheus.log (for error messages).
  std::string LogTail(int lines = 40) const;

 private:
  void WriteConfig(const std::vector<std::string>& scrape_targets,
                   const std::vector<std::string>& alertmanager_urls,
                   const std::vector<std::string>& rule_files, const std::string& scrape_interval,
                   const std::string& evaluation_interval) const;
  void Start();
  void WaitForAlertmanagers();
  nlohmann::json GetApi(const std::string& path, const std::string& query) const;

  std::string dir_;
  std::string config_file_;
  std::string log_file_;
  size_t alertmanagers_ = 0;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace sbd::testing
