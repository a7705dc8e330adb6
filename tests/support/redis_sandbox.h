// Throw-away Redis 7 replication groups under three real sentinels for integration tests: a
// master, replicas, and the faults the detector must see (a replica promoted by hand, a
// planned SENTINEL FAILOVER, a frozen master, min-replicas-to-write).
//
// Every server and sentinel listens on 127.0.0.1 only, on a free port, with its files in its
// own directory under a private temp root; nothing is saved to disk. Redis runs as root here
// (it only warns), so no user switch is needed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace sbd::testing {

/// One running redis-server or redis-sentinel. Not thread-safe; owned by its RedisSandbox.
class RedisProcess {
 public:
  RedisProcess(std::string name, std::string dir, int port, pid_t pid)
      : name_(std::move(name)), dir_(std::move(dir)), port_(port), pid_(pid) {}
  ~RedisProcess();  // stops it if still running (never throws)
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  const std::string& name() const { return name_; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  /// "127.0.0.1:port", the address Sentinel announces.
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  /// Runs redis-cli against it; throws with the output when redis-cli fails. Trimmed output.
  std::string Cli(const std::vector<std::string>& args) const;
  /// "master" or "slave" from INFO replication; "" when it does not answer.
  std::string Role() const;
  void Freeze();  ///< SIGSTOP
  void Resume();  ///< SIGCONT
  void Stop();

 private:
  std::string name_;
  std::string dir_;
  int port_;
  pid_t pid_;
};

/// A temp root holding the servers and sentinels started through it. Not thread-safe.
class RedisSandbox {
 public:
  RedisSandbox();
  ~RedisSandbox();
  RedisSandbox(const RedisSandbox&) = delete;
  RedisSandbox& operator=(const RedisSandbox&) = delete;

  /// Starts redis-server; a replica of `master` when given. Waits until it answers PING
  /// (and, for a replica, until its link to the master is up). Throws on failure.
  RedisProcess& StartServer(const std::string& name, const RedisProcess* master = nullptr);
  /// Starts a redis-server serving TLS only (`port 0`, `tls-port` on its port) with
  /// `tls_config` (tls-cert-file, tls-key-file, tls-ca-cert-file, tls-auth-clients lines and
  /// any other). Ready once its log says it accepts connections. Cli()/Role() do not work on
  /// it (they speak plain TCP). Throws on failure.
  RedisProcess& StartTlsServer(const std::string& name, const std::string& tls_config);
  /// Starts `count` sentinels monitoring `master` as `master_name` (quorum 2), with
  /// `down_after` and `failover_timeout`; waits until each sees the others and the replicas.
  void StartSentinels(const std::string& master_name, const RedisProcess& master, int count,
                      std::chrono::milliseconds down_after,
                      std::chrono::milliseconds failover_timeout);
  /// Starts one more sentinel with `config` as its whole configuration (a `sentinel monitor`
  /// of another master, a forged `sentinel config-epoch`, ...), listed after the others in
  /// sentinels(). Waits until it answers PING only. Throws on failure.
  RedisProcess& StartSentinel(const std::string& name, const std::string& config);
  const std::vector<std::unique_ptr<RedisProcess>>& sentinels() const { return sentinels_; }
  /// The address the first sentinel names for `master_name` ("ip:port"), "" when none.
  std::string SentinelMaster(const std::string& master_name) const;
  const std::string& root() const { return root_.path(); }

 private:
  std::unique_ptr<RedisProcess> Spawn(const std::string& binary, const std::string& name,
                                      const std::string& config_text, bool tls_only = false);

  TempDir root_;
  std::vector<std::unique_ptr<RedisProcess>> servers_;
  std::vector<std::unique_ptr<RedisProcess>> sentinels_;
};

}  // namespace sbd::testing
