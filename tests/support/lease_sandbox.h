// Application leases for tests: a throw-away redis-server and lease worker processes
// (tests/support/lease_worker.cpp), each on a free loopback port.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace sbd::testing {

/// A redis-server 7 on 127.0.0.1:free port with no persistence, in its own temporary
/// directory. With a `password`, the default user needs it; with a `reader` name too, that
/// ACL user (password `password`) may only read (+@read +scan +@connection). Stopped by the
/// destructor. Throws std::runtime_error when it does not start. Not thread-safe.
class RedisServer {
 public:
  explicit RedisServer(const std::string& password = "", const std::string& reader = "");
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  /// Runs one command as the default user; the reply as text ("OK", "(integer) 1",
  /// "(error) ..."). Throws when the server cannot be reached.
  std::string Command(const std::vector<std::string>& argv) const;
  void Freeze() const;  ///< SIGSTOP
  void Resume() const;  ///< SIGCONT

 private:
  TempDir dir_;
  std::string password_;
  int port_ = 0;
  pid_t pid_ = -1;
};

/// One lease worker process competing for `key` with its own `token`: SET NX PX to acquire,
/// a token-checked renewal every `renew` (counted in its own running time, so a freeze goes
/// unnoticed until then), `leader_election_master_status{name=<lock>,token=<token>}` on
/// http://127.0.0.1:<metrics_port>/metrics. Stopped (SIGTERM, releasing) by the destructor.
class LeaseWorker {
 public:
  struct Options {
    int redis_port = 0;
    std::string key = "lease:demo";
    std::string lock = "demo";
    std::string token;
    std::chrono::milliseconds ttl{3000};
    std::chrono::milliseconds renew{1000};
  };
  LeaseWorker(const std::string& binary, const Options& options, const std::string& log_dir);
  ~LeaseWorker();
  LeaseWorker(const LeaseWorker&) = delete;
  LeaseWorker& operator=(const LeaseWorker&) = delete;

  int metrics_port() const { return metrics_port_; }
  std::string metrics_url() const { return "http://127.0.0.1:" + std::to_string(metrics_port_); }
  pid_t pid() const { return pid_; }
  const std::string& token() const { return options_.token; }
  void Freeze() const;  ///< SIGSTOP
  void Resume() const;  ///< SIGCONT
  /// The worker's /metrics text, or "" when it does not answer within 500 ms.
  std::string Metrics() const;
  /// Its `lease_worker_renewals_total`, or -1 when unreadable.
  long Renewals() const;
  /// True when its claim series says 1.
  bool Claims() const;

 private:
  Options options_;
  std::string log_file_;
  int metrics_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace sbd::testing
