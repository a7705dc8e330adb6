// Throw-away Alertmanager 0.25 servers for tests, a webhook receiver that records what they
// notify, and a "black hole" listener that accepts TCP connections but never answers.
//
// Everything listens on 127.0.0.1 only, on free ports.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/temp_dir.h"  // TempDir, for the users of this header

namespace httplib {
class Server;
}

namespace sbd::testing {

/// Path of the Alertmanager binary: $SBD_ALERTMANAGER if set, else
/// /usr/bin/prometheus-alertmanager, else "alertmanager" (looked up in PATH).
std::string AlertmanagerBinary();

/// A webhook receiver inside the test: an httplib server on 127.0.0.1:free port that records
/// every POST (Alertmanager notification, or a raw push when used as a fake Alertmanager) with
/// the instant it arrived (steady_clock + system_clock) and its parsed JSON. Answers 200 to every
/// POST, on any path. Serves HTTPS instead when given a certificate and key. Thread-safe.
class WebhookReceiver {
 public:
  struct Delivery {
    std::chrono::steady_clock::time_point at;
    std::chrono::system_clock::time_point wall;
    nlohmann::json body;        // null if the body was not JSON
    std::string path;           // e.g. "/webhook" or "/api/v2/alerts"
    std::string authorization;  // the Authorization header, if any
  };

  /// Throws std::runtime_error if it cannot listen (or load the certificate).
  WebhookReceiver(const std::string& cert_file = "", const std::string& key_file = "");
  ~WebhookReceiver();
  WebhookReceiver(const WebhookReceiver&) = delete;
  WebhookReceiver& operator=(const WebhookReceiver&) = delete;

  /// Webhook URL for an Alertmanager config: "http://127.0.0.1:P/webhook".
  std::string url() const;
  /// "http://127.0.0.1:P" ("https://" with TLS), to use the receiver as a fake Alertmanager.
  std::string base_url() const;
  int port() const { return port_; }

  std::vector<Delivery> Deliveries() const;
  /// Waits (on a condition variable, no polling) until some delivery, past or future, satisfies
  /// `pred`, or `deadline` elapses. `pred` runs under the receiver's lock.
  bool WaitFor(std::function<bool(const Delivery&)> pred, std::chrono::milliseconds deadline) const;

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  bool tls_ = false;
  int port_ = 0;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Delivery> deliveries_;
};

/// The firing alert `alertname` of cluster `cluster` in one notification, if it carries one.
std::optional<nlohmann::json> FiringAlert(const WebhookReceiver::Delivery& d,
                                          const std::string& alertname, const std::string& cluster);

/// Writes a self-signed certificate for IP 127.0.0.1 (and its key) with the openssl CLI into
/// `dir`: returns {cert_file, key_file}. Throws std::runtime_error on failure.
std::pair<std::string, std::string> MakeLoopbackCertificate(const std::string& dir);

/// A TCP listener on 127.0.0.1:free port that never accepts nor answers: connects complete in
/// the kernel (until the backlog is full), requests then hang until the client's timeout.
class BlackHoleListener {
 public:
  BlackHoleListener();
  ~BlackHoleListener();
  BlackHoleListener(const BlackHoleListener&) = delete;
  BlackHoleListener& operator=(const BlackHoleListener&) = delete;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

/// One Alertmanager 0.25 on loopback: its own free --web.listen-address, --storage.path under
/// `dir` (created if missing), config and log (alertmanager.log) in `dir`. Routes everything to
/// `webhook_url` with group_by ['alertname','cluster'], the given group_wait/group_interval,
/// repeat_interval 1h, send_resolved true. Gossip is disabled (--cluster.listen-address="")
/// unless `peers` are given or `enable_cluster` is true; then it listens for gossip on
/// 127.0.0.1:free port (see cluster_address()), joins `peers` ("host:port") and uses
/// --cluster.peer-timeout=1s so that a second peer notifies soon after the first would have.
/// The constructor waits (deadline 30 s) until /-/ready answers 200 and throws
/// std::runtime_error with the log tail otherwise. The destructor stops it. Not thread-safe.
class AlertmanagerServer {
 public:
  AlertmanagerServer(const std::string& dir, const std::string& webhook_url,
                     std::string group_wait = "1s", std::string group_interval = "1s",
                     std::vector<std::string> peers = {}, bool enable_cluster = false);
  ~AlertmanagerServer();
  AlertmanagerServer(const AlertmanagerServer&) = delete;
  AlertmanagerServer& operator=(const AlertmanagerServer&) = delete;

  /// "http://127.0.0.1:P" (stays valid after Stop(): then nothing listens there).
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  /// "127.0.0.1:P" of the gossip listener, "" when clustering is disabled.
  std::string cluster_address() const;
  /// SIGTERM, then SIGKILL after 10 s; waits until the process is gone. Idempotent.
  void Stop();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  /// GET /api/v2/alerts (active alerts). Throws std::runtime_error on failure.
  nlohmann::json Alerts() const;
  /// The last `lines` lines of alertmanager.log (for error messages).
  std::string LogTail(int lines = 40) const;

 private:
  void Start();

  std::string dir_;
  std::string config_file_;
  std::string log_file_;
  std::vector<std::string> peers_;
  bool cluster_ = false;
  int port_ = 0;
  int cluster_port_ = 0;
  pid_t pid_ = -1;
};

/// True when the delivery carries an alert named `alertname` with `status` ("firing",
/// "resolved"); false for a body that is not Alertmanager's.
bool Carries(const WebhookReceiver::Delivery& d, const std::string& alertname,
             const std::string& status);
/// Carries `alertname` firing. A resolved notification of an earlier incident, delivered late,
/// names the alert too: it never counts as the page.
inline bool Fires(const WebhookReceiver::Delivery& d, const std::string& alertname) {
  return Carries(d, alertname, "firing");
}

}  // namespace sbd::testing
