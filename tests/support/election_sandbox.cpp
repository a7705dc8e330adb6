#include "tests/support/election_sandbox.h"

#include <httplib.h>
#include <signal.h>

#include <stdexcept>

#include "tests/support/files.h"
#include "tests/support/process.h"

namespace sbd::testing {

EtcdCandidate::EtcdCandidate(const std::string& binary, const Options& options,
                             const std::string& log_dir)
    : options_(options) {
  metrics_port_ = FreeLoopbackPort();
  log_file_ = log_dir + "/candidate-" + options.value + ".log";
  BackgroundOptions background;
  background.die_with_parent = true;
  pid_ = SpawnBackgroundProcess(
      {binary, "--endpoint", options.endpoint, "--prefix", options.prefix, "--lock", options.lock,
       "--value", options.value, "--ttl-s", std::to_string(options.ttl_s), "--renew-ms",
       std::to_string(options.renew_ms), "--metrics-port", std::to_string(metrics_port_),
       "--storage-port", std::to_string(options.storage_port)},
      log_file_, background);
  std::string how;
  if (WaitUntilReady(
          pid_, [&] { return Renewals() >= 0; }, std::chrono::seconds(10),
          std::chrono::milliseconds(50), &how) != StartupOutcome::kReady) {
    StopChildProcess(pid_, SIGKILL, std::chrono::seconds(2));
    throw std::runtime_error("etcd candidate did not start (" + how + "):\n" + Tail(log_file_, 20));
  }
}

EtcdCandidate::~EtcdCandidate() {
  ::kill(pid_, SIGCONT);
  StopChildProcess(pid_, SIGTERM, std::chrono::seconds(5));
}

void EtcdCandidate::Freeze() const { ::kill(pid_, SIGSTOP); }
void EtcdCandidate::Resume() const { ::kill(pid_, SIGCONT); }
void EtcdCandidate::Resign() const { ::kill(pid_, SIGUSR1); }

std::string EtcdCandidate::Metrics() const {
  httplib::Client client("127.0.0.1", metrics_port_);
  client.set_connection_timeout(std::chrono::milliseconds(500));
  client.set_read_timeout(std::chrono::milliseconds(500));
  auto result = client.Get("/metrics");
  if (!result || result->status != 200) return "";
  return result->body;
}

long EtcdCandidate::Renewals() const {
  const std::string text = Metrics();
  const std::string name = "etcd_candidate_renewals_total ";
  const auto at = text.find("\n" + name);
  if (at == std::string::npos) return -1;
  return std::stol(text.substr(at + 1 + name.size()));
}

std::string EtcdCandidate::ClaimedToken() const {
  const std::string text = Metrics();
  const std::string label = "token=\"";
  const auto at = text.find(label);
  if (at == std::string::npos) return "";
  const auto end = text.find("\"} ", at + label.size());
  if (end == std::string::npos || text.compare(end + 3, 1, "1") != 0) return "";
  return text.substr(at + label.size(), end - at - label.size());
}

TokenStorage::TokenStorage(const std::string& binary, const std::string& lock, bool check,
                           const std::string& log_dir) {
  port_ = FreeLoopbackPort();
  log_file_ = log_dir + "/storage.log";
  BackgroundOptions background;
  background.die_with_parent = true;
  pid_ = SpawnBackgroundProcess(
      {binary, "--port", std::to_string(port_), "--lock", lock, "--check", check ? "on" : "off"},
      log_file_, background);
  std::string how;
  if (WaitUntilReady(
          pid_, [&] { return Value("token_storage_accepted_writes_total ") >= 0; },
          std::chrono::seconds(10), std::chrono::milliseconds(50),
          &how) != StartupOutcome::kReady) {
    StopChildProcess(pid_, SIGKILL, std::chrono::seconds(2));
    throw std::runtime_error("token storage did not start (" + how + "):\n" + Tail(log_file_, 20));
  }
}

TokenStorage::~TokenStorage() { StopChildProcess(pid_, SIGTERM, std::chrono::seconds(5)); }

long long TokenStorage::Value(const std::string& series) const {
  httplib::Client client("127.0.0.1", port_);
  client.set_connection_timeout(std::chrono::milliseconds(500));
  client.set_read_timeout(std::chrono::milliseconds(500));
  auto result = client.Get("/metrics");
  if (!result || result->status != 200) return -1;
  const std::string text = "\n" + result->body;
  const auto at = text.find("\n" + series);
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + 1 + series.size()));
}

}  // namespace sbd::testing
