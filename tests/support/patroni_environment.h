// A complete sandbox for end-to-end runs on Patroni: etcd 3.4 (or ZooKeeper 3.8), a Patroni 3.0
// cluster (3 members by default), Alertmanager 0.25 with a webhook receiver that timestamps
// deliveries, the detector binary, and an independent poller of writability. Used by the
// integration tests and the demo.
#pragma once

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/patroni_sandbox.h"
#include "tests/support/process.h"
#include "tests/support/zookeeper_sandbox.h"

namespace sbd::testing {

/// Patroni's lease TTL in the sandbox: the page must beat it.
constexpr int kSandboxTtlSeconds = 10;

/// Polls every member's PostgreSQL directly, every 50 ms, and remembers when the number of
/// writable members first reached two. Independent of the detector's code.
class WritablePoller {
 public:
  explicit WritablePoller(const std::vector<PatroniMember>& members) {
    for (const auto& m : members) dsns_.push_back(m.SuperuserDsn() + " connect_timeout=2");
    thread_ = std::thread([this] { Run(); });
  }
  ~WritablePoller() {
    stop_ = true;
    thread_.join();
  }
  /// When two members were first seen writable at once since the last Reset().
  std::optional<std::chrono::steady_clock::time_point> SecondWritableAt() const {
    std::lock_guard<std::mutex> lock(mu_);
    return second_writable_at_;
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    second_writable_at_.reset();
  }

 private:
  void Run() {
    std::vector<std::unique_ptr<pqxx::connection>> connections(dsns_.size());
    while (!stop_) {
      int writable = 0;
      for (size_t i = 0; i < dsns_.size(); ++i) {
        try {
          if (!connections[i] || !connections[i]->is_open()) {
            connections[i] = std::make_unique<pqxx::connection>(dsns_[i]);
          }
          pqxx::nontransaction tx(*connections[i]);
          if (!tx.exec1("SELECT pg_is_in_recovery()")[0].as<bool>()) ++writable;
        } catch (const std::exception&) {
          connections[i].reset();
        }
      }
      const auto now = std::chrono::steady_clock::now();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (writable >= 2 && !second_writable_at_) second_writable_at_ = now;
      }
      std::this_thread::sleep_until(now + std::chrono::milliseconds(50));  // the poll period itself
    }
  }

  std::vector<std::string> dsns_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::optional<std::chrono::steady_clock::time_point> second_writable_at_;
  std::thread thread_;
};

inline std::string MemberYaml(const PatroniMember& m, const std::string& password_file,
                              const std::string& prefix = "") {
  return "      - name: " + prefix + m.name + "\n        dsn: \"" + m.MonitorDsn() +
         "\"\n        password_file: " + password_file + "\n        patroni_url: " + m.RestUrl() +
         "\n";
}

/// The DCS the sandbox's Patroni runs on.
enum class PatroniDcs { kEtcd, kZooKeeper, kZooKeeperEnsemble };

/// Everything the scenarios share; built by the first scenario, torn down at exit.
struct Environment {
  ScopedTempDir root{"sbd-patroni-it-"};
  std::unique_ptr<EtcdServer> etcd;             ///< set on etcd
  std::unique_ptr<ZooKeeperServer> zookeeper;   ///< set on ZooKeeper
  std::unique_ptr<ZooKeeperEnsemble> ensemble;  ///< set on a ZooKeeper ensemble
  std::unique_ptr<PatroniCluster> cluster;
  std::unique_ptr<WebhookReceiver> webhook;
  std::unique_ptr<AlertmanagerServer> alertmanager;
  std::unique_ptr<DetectorProcess> detector;
  std::string config_file;
  std::string dropins;  ///< the detector's declarations drop-in directory
  /// Keys added to the demo cluster's config as they are ("    remediation:\n      ...").
  std::string cluster_extra;
  int port = 0;

  /// `binary` is the splitbrain-detector to run; `extra` goes into cluster_extra.
  explicit Environment(const std::string& binary, PatroniDcs dcs = PatroniDcs::kEtcd,
                       int members = 3, std::string extra = "")
      : cluster_extra(std::move(extra)) {
    const auto start = std::chrono::steady_clock::now();
    if (dcs == PatroniDcs::kEtcd) {
      etcd = std::make_unique<EtcdServer>(root.path() + "/etcd");
      cluster = std::make_unique<PatroniCluster>(root.path() + "/demo", "demo", *etcd, members,
                                                 kSandboxTtlSeconds, 1, 3);
    } else if (dcs == PatroniDcs::kZooKeeper) {
      zookeeper = std::make_unique<ZooKeeperServer>(root.path() + "/zookeeper");
      cluster = std::make_unique<PatroniCluster>(root.path() + "/demo", "demo", *zookeeper, members,
                                                 kSandboxTtlSeconds, 1, 3);
    } else {
      ensemble = std::make_unique<ZooKeeperEnsemble>(root.path() + "/zookeeper");
      cluster = std::make_unique<PatroniCluster>(root.path() + "/demo", "demo", *ensemble, members,
                                                 kSandboxTtlSeconds, 1, 3);
    }
    cluster->WaitHealthy();
    std::cout << "patroni cluster up in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
              << " s\n";
    webhook = std::make_unique<WebhookReceiver>();
    alertmanager = std::make_unique<AlertmanagerServer>(root.path() + "/am", webhook->url());
    config_file = root.path() + "/detector.yml";
    dropins = root.path() + "/declarations.d";
    RunCommand({"mkdir", "-p", dropins});
    WriteConfig({});
    port = FreeLoopbackPort();
    detector = std::make_unique<DetectorProcess>(
        binary,
        std::vector<std::string>{"--config.file=" + config_file,
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port)},
        root.path() + "/detector.log");
    if (!WaitFor([&] { return HttpGet(port, "/-/ready") == "Ready\n"; },
                 std::chrono::seconds(20))) {
      throw std::runtime_error("detector not ready:\n" + detector->Log());
    }
  }

  /// The detector's config: the demo cluster (ttl read from the DCS), plus `extra` members
  /// grouped under it.
  void WriteConfig(const std::vector<const PatroniMember*>& extra) {
    std::string yaml = Header() + "    members:\n";
    for (const auto& m : cluster->members()) yaml += MemberYaml(m, cluster->PasswordFile());
    for (const auto* m : extra) yaml += MemberYaml(*m, cluster->PasswordFile(), "other-");
    ReplaceFile(root.path(), "detector.yml", yaml);
  }

  /// The same, with every member taken from a Prometheus file_sd target file in which all of
  /// them carry the label cluster=demo, as a monitoring inventory would group them.
  void WriteFileSdConfig(const std::vector<const PatroniMember*>& extra) {
    nlohmann::json targets = nlohmann::json::array();
    auto add = [&](const PatroniMember& m, const std::string& prefix) {
      targets.push_back(
          {{"targets", {"127.0.0.1:" + std::to_string(m.pg_port)}},
           {"labels",
            {{"cluster", "demo"}, {"member", prefix + m.name}, {"patroni_url", m.RestUrl()}}}});
    };
    for (const auto& m : cluster->members()) add(m, "");
    for (const auto* m : extra) add(*m, "other-");
    // Both replaced whole, as an inventory tool writes them: the reload the file watcher starts
    // when the targets change may read either file at any moment.
    ReplaceFile(root.path(), "targets.json", targets.dump(1));
    ReplaceFile(root.path(), "detector.yml",
                Header() + "    file_sd:\n      files: [" + root.path() +
                    "/targets.json]\n      group_by: cluster\n      name_label: member\n"
                    "      patroni_url_label: patroni_url\n"
                    "      dsn: \"user=splitbrain dbname=postgres\"\n      password_file: " +
                    cluster->PasswordFile() + "\n");
  }

  std::string Header() const {
    return "alerting:\n  alertmanagers:\n    - url: " + alertmanager->url() +
           "\n  resend_interval: 5s\nsuppressions:\n  dropin_dir: " + dropins +
           "\nclusters:\n  - name: demo\n    kind: patroni\n    scope: demo\n" +
           (etcd ? "    etcd:\n      endpoints: [" + etcd->endpoint() + "]\n"
                 : "    zookeeper:\n      hosts: [" + ZooKeeperHostsYaml() + "]\n") +
           "    probe_interval: 1s\n    probe_timeout: 800ms\n" + cluster_extra;
  }

  /// The detector's zookeeper.hosts items: "'127.0.0.1:A', '127.0.0.1:B'".
  std::string ZooKeeperHostsYaml() const {
    if (zookeeper) return "'" + zookeeper->host() + "'";
    std::string hosts;
    for (const std::string& host : ensemble->host_list()) {
      hosts += (hosts.empty() ? "'" : ", '") + host + "'";
    }
    return hosts;
  }

  nlohmann::json Status() const {
    const std::string body = HttpGet(port, "/status");
    return body.empty() ? nlohmann::json() : nlohmann::json::parse(body)["clusters"][0];
  }
  std::string Verdict() const { return Status().value("verdict", ""); }

  /// Waits until the verdict is `want`. On the way it writes into `trail` the verdicts seen, in
  /// order with their counts ("healthy x4, unknown x2"), and the last status, so that a
  /// scenario that never gets there says where it stayed.
  bool ReachesVerdict(const std::string& want, std::chrono::seconds deadline,
                      std::string& trail) const {
    std::string last_verdict;
    int repeats = 0;
    nlohmann::json last;
    std::vector<std::string> seen;
    const bool reached = WaitFor(
        [&] {
          last = Status();
          const std::string verdict = last.value("verdict", "");
          if (verdict == last_verdict && !seen.empty()) {
            seen.back() = verdict + " x" + std::to_string(++repeats);
          } else {
            last_verdict = verdict;
            repeats = 1;
            seen.push_back(verdict + " x1");
          }
          return verdict == want;
        },
        deadline);
    trail = "verdicts seen waiting for " + want + ": ";
    for (size_t i = 0; i < seen.size(); ++i) trail += (i ? ", " : "") + seen[i];
    trail += "\nlast status: " + last.dump(2);
    return reached;
  }

  /// A scenario's precondition, whatever ran before it (or nothing): the cluster healed and
  /// streaming, then the detector's verdict healthy. Returns the instant that held, from which
  /// the scenario counts what it causes. Throws past the deadline.
  std::chrono::steady_clock::time_point Settle(
      std::chrono::seconds deadline = std::chrono::seconds(120)) {
    cluster->Heal();
    if (!WaitFor([&] { return Verdict() == "healthy"; }, deadline)) {
      throw std::runtime_error("detector not healthy:\n" + Status().dump(2));
    }
    return std::chrono::steady_clock::now();
  }

  /// Names of the alerts delivered firing after `since`.
  std::vector<std::string> FiringSince(std::chrono::steady_clock::time_point since) const {
    std::vector<std::string> out;
    for (const auto& d : webhook->Deliveries()) {
      if (d.at < since || !d.body.contains("alerts")) continue;
      for (const auto& alert : d.body["alerts"]) {
        if (alert.value("status", "") == "firing") {
          out.push_back(alert["labels"].value("alertname", ""));
        }
      }
    }
    return out;
  }
  std::string Metrics() const { return HttpGet(port, "/metrics"); }

  /// Deliveries after `since` that carry an alert named `alertname` with `status`.
  std::vector<WebhookReceiver::Delivery> Notifications(
      const std::string& alertname, const std::string& status,
      std::chrono::steady_clock::time_point since) const {
    std::vector<WebhookReceiver::Delivery> out;
    for (const auto& d : webhook->Deliveries()) {
      if (d.at >= since && Carries(d, alertname, status)) out.push_back(d);
    }
    return out;
  }
};

}  // namespace sbd::testing
