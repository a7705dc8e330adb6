// ZooKeeper for tests (issue 27): a standalone ZooKeeper 3.8 server from the Debian package
// (java, /usr/share/java/zookeeper.jar) on a free loopback port, and lock candidates using
// real kazoo (tests/support/zk_candidate.py), each on its own free loopback metrics port.
#pragma once

#include <sys/types.h>

#include <string>

namespace sbd::testing {

/// One ZooKeeper server: zoo.cfg in `dir` (clientPort on 127.0.0.1, dataDir under `dir`, the
/// admin server off, no four-letter words, tickTime 200 ms so sessions of 1 s are allowed, and
/// up to 30 s, so that Patroni gets its ttl).
/// Started by the constructor, which waits until the port answers a connect; stopped by the
/// destructor. Throws std::runtime_error with the log's tail when it does not start.
class ZooKeeperServer {
 public:
  explicit ZooKeeperServer(const std::string& dir);
  ~ZooKeeperServer();
  ZooKeeperServer(const ZooKeeperServer&) = delete;
  ZooKeeperServer& operator=(const ZooKeeperServer&) = delete;

  /// "127.0.0.1:PORT".
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  void Stop();   ///< SIGTERM, then SIGKILL; idempotent
  void Start();  ///< on the same port and data; no-op when running
  std::string LogTail() const;

 private:
  std::string dir_;
  std::string log_file_;
  int port_ = 0;
  pid_t pid_ = -1;
};

/// A kazoo Lock candidate on `path` of `hosts`, with `identifier` as its node's data.
class ZooKeeperCandidate {
 public:
  ZooKeeperCandidate(const std::string& hosts, const std::string& path,
                     const std::string& identifier, double session_timeout_s,
                     const std::string& log_dir);
  ~ZooKeeperCandidate();
  ZooKeeperCandidate(const ZooKeeperCandidate&) = delete;
  ZooKeeperCandidate& operator=(const ZooKeeperCandidate&) = delete;

  std::string metrics_url() const {
    return "http://127.0.0.1:" + std::to_string(metrics_port_) + "/metrics";
  }
  void Freeze() const;  ///< SIGSTOP
  void Resume() const;  ///< SIGCONT
  void Resign() const;  ///< SIGUSR1: release, queue again
  /// The czxid it claims with, or "" when it does not claim (or does not answer).
  std::string ClaimedToken() const;

 private:
  std::string Metrics() const;
  std::string log_file_;
  int metrics_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace sbd::testing
