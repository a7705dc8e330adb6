// Pushes split-brain alerts to Alertmanager's v2 API (POST /api/v2/alerts), like Prometheus does:
// firing alerts are re-sent periodically with a leased endsAt, so that the alerts of a dead
// detector expire on their own, and alerts that stop firing are resolved explicitly.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace sbd {

class EventLoop;

/// One alert as Alertmanager's v2 API takes it.
struct Alert {
  std::map<std::string, std::string> labels;       // alertname, severity, cluster, scope, ...
  std::map<std::string, std::string> annotations;  // summary, description, runbook_url
  std::string generator_url;
};

struct AlertPusherOptions {
  /// Base URLs, e.g. "http://127.0.0.1:9093" or "https://user:pass@am.example:9093/prefix".
  /// Credentials in a URL are sent as basic auth and never appear in stats or logs.
  std::vector<std::string> alertmanager_urls;
  /// PEM CA bundle that verifies https Alertmanagers; empty: the system trust store.
  std::string ca_file;
  /// Per POST, as a whole: connect, TLS, send, status, headers and body together.
  std::chrono::milliseconds timeout{2000};
  int max_attempts = 3;                              // per push, per Alertmanager
  std::chrono::milliseconds retry_backoff{250};      // doubled each attempt
  std::chrono::milliseconds resend_interval{30000};  // re-send firing alerts this often
  // endsAt of a firing alert = last send + 4 * resend_interval (like Prometheus), so a dead
  // detector's alerts expire.
  /// Per Alertmanager: most alert states waiting to be sent. Beyond it the oldest are dropped
  /// (a dead Alertmanager must not build an unbounded queue).
  std::size_t max_queued_alerts = 1000;
};

/// Per-Alertmanager push statistics for /metrics. A "push" is one POST of a batch of alerts,
/// including its retries; `failures` counts the pushes that failed after all attempts.
struct AlertmanagerStats {
  std::string url;  // without credentials
  uint64_t pushes = 0, failures = 0, alerts_sent = 0;
  uint64_t dropped = 0;  // alert states dropped because the queue was full
  double last_success_unix = 0, last_failure_unix = 0;
  std::string last_error;  // of the last failed push; never holds credentials
};

/// "2006-01-02T15:04:05.000Z" (RFC 3339, milliseconds, UTC).
std::string FormatRfc3339Millis(std::chrono::system_clock::time_point t);

/// Pushes alerts to every configured Alertmanager's POST /api/v2/alerts, each with its own
/// worker thread, queue and retries. The POSTs of all run on one event loop of the pusher's own
/// (LoopHttpClient, bounded as a whole and capped like a probe's read), so an Alertmanager that
/// trickles its answer costs each attempt at most `timeout` and holds up no other, and a page is
/// never queued behind the probes' loop. Tracks firing alerts by their label set:
/// startsAt stays stable for as long as the alert keeps firing; endsAt is re-leased on every
/// (re)send; an alert that stops firing is resolved by sending it once more with endsAt = now.
/// Thread-safe; owns threads (non-copyable, non-movable).
class AlertPusher {
 public:
  /// Throws std::invalid_argument for a URL that is not http(s)://host[:port][/path] (the
  /// message never holds the URL's credentials).
  explicit AlertPusher(AlertPusherOptions options);
  /// Stops the workers: a POST in flight is abandoned at once and pending retries are dropped.
  ~AlertPusher();
  AlertPusher(const AlertPusher&) = delete;
  AlertPusher& operator=(const AlertPusher&) = delete;

  /// Declares the complete set of alerts currently firing for `group` (e.g. a cluster name).
  /// New alerts (and alerts whose annotations or generator URL changed) are queued to every
  /// worker before Update returns; alerts of this group missing from `firing` are resolved;
  /// still-firing ones are re-sent when resend_interval has elapsed since their last send.
  /// Alerts without labels or with invalid label names are skipped (logged); of two alerts with
  /// the same label set the last wins. Never blocks on the network.
  void Update(const std::string& group, std::vector<Alert> firing);
  /// Resolves everything of every group (used at shutdown) and waits up to `wait` for the POSTs
  /// (including retries). True if every worker went idle within `wait`.
  bool ResolveAll(std::chrono::milliseconds wait);
  std::vector<AlertmanagerStats> Stats() const;
  /// Alerts currently firing (with their startsAt), for the status view.
  std::vector<std::pair<Alert, std::chrono::system_clock::time_point>> Firing() const;

 private:
  class Worker;
  struct Tracked {
    Alert alert;
    std::chrono::system_clock::time_point starts_at;
    std::chrono::steady_clock::time_point last_sent;
  };
  using LabelSet = std::map<std::string, std::string>;

  AlertPusherOptions options_;
  std::unique_ptr<EventLoop> loop_;  // before the workers, whose POSTs run on it
  std::vector<std::unique_ptr<Worker>> workers_;
  mutable std::mutex mu_;  // guards groups_; taken before any worker's mutex
  std::map<std::string, std::map<LabelSet, Tracked>> groups_;
};

}  // namespace sbd
