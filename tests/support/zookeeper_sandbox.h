// ZooKeeper for tests (issue 27): a standalone ZooKeeper 3.8 server from the Debian package
// (java, /usr/share/java/zookeeper.jar) on a free loopback port, and lock candidates using
// real kazoo (tests/support/zk_candidate.py), each on its own free loopback metrics port.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace sbd::testing {

/// One ZooKeeper server: zoo.cfg in `dir` (clientPort on 127.0.0.1, dataDir under `dir`, the
/// admin server off, no four-letter words, tickTime 200 ms so sessions of 1 s are allowed, and
/// up to 30 s, so that Patroni gets its ttl).
/// Started by the constructor, which waits until the port answers a connect; stopped by the
/// destructor. Throws std::runtime_error with the log's tail when it does not start.
class ZooKeeperServer {
 public:
  explicit ZooKeeperServer(const std::string& dir);
  /// One server of an ensemble: `myid` and the `server.N` lines of zoo.cfg (QuorumPeerMain);
  /// the constructor waits only for its client port (a quorum serves once most are up).
  ZooKeeperServer(const std::string& dir, int client_port, int myid, const std::string& servers);
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
  void Configure(const std::string& extra);

  std::string dir_;
  std::string log_file_;
  std::string main_class_ = "org.apache.zookeeper.server.ZooKeeperServerMain";
  int port_ = 0;
  pid_t pid_ = -1;
};

/// A three-server ZooKeeper ensemble on loopback (free client, quorum and election ports),
/// each server configured as ZooKeeperServer's. The constructor returns once the ensemble
/// serves (a kazoo client connects and reads "/"); throws otherwise.
class ZooKeeperEnsemble {
 public:
  explicit ZooKeeperEnsemble(const std::string& dir);
  /// "127.0.0.1:A,127.0.0.1:B,127.0.0.1:C", the form the clients take.
  std::string hosts() const;
  std::vector<std::string> host_list() const;
  ZooKeeperServer& server(size_t i) { return *servers_.at(i); }
  size_t size() const { return servers_.size(); }
  /// True once a client connected to the ensemble can read "/" within `timeout_s`.
  bool Serving(double timeout_s) const;

 private:
  std::vector<std::unique_ptr<ZooKeeperServer>> servers_;
};

/// A kazoo Lock candidate on `path` of `hosts`, with `identifier` as its node's data; with a
/// `storage_port`, it writes to that TokenStorage with its token while it believes it holds.
class ZooKeeperCandidate {
 public:
  ZooKeeperCandidate(const std::string& hosts, const std::string& path,
                     const std::string& identifier, double session_timeout_s,
                     const std::string& log_dir, int storage_port = 0);
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
