// A throw-away repmgr 5.3 cluster for integration tests: PostgreSQL 15 servers on free loopback
// ports, the primary registered with `repmgr primary register`, each standby made with
// `repmgr standby clone` and `repmgr standby register`. Every PostgreSQL and repmgr command runs
// as the `postgres` OS user (PostgreSQL refuses root).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace sbd::testing {

/// The cluster; non-copyable, not thread-safe. The destructor thaws and stops every server.
class RepmgrCluster {
 public:
  static constexpr const char* kMonitorPassword = "sbd-repmgr-secret";

  struct Node {
    std::string name;  ///< node1, node2, ...: repmgr's node_name and the detector's member
    int id = 0;
    int port = 0;
    std::string dir;  ///< holds data/, repmgr.conf and the server log
    std::vector<pid_t> frozen;
  };

  /// node1 the primary, the others its standbys; throws std::runtime_error on failure. With
  /// `repmgrd`, every node runs repmgrd with automatic failover after 2 reconnect attempts 1 s
  /// apart (connect_timeout 2 s), monitoring every second. With `witness`, one more server, not
  /// replicating, is registered with `repmgr witness register` (node_name "witness"; repmgrd,
  /// when it runs, copies repmgr.nodes to it every second).
  explicit RepmgrCluster(int nodes = 3, bool repmgrd = false, bool witness = false);
  ~RepmgrCluster();
  RepmgrCluster(const RepmgrCluster&) = delete;
  RepmgrCluster& operator=(const RepmgrCluster&) = delete;

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::string& root() const { return root_->path(); }
  /// The detector's role (pg_monitor, and SELECT on repmgr.nodes and repmgr.events).
  std::string MemberDsn(size_t index) const;
  const std::string& PasswordFile() const { return password_file_; }
  /// The witness node's server, as the detector reaches it; throws without a witness.
  std::string WitnessDsn() const;
  /// psql as postgres on the witness node's repmgr database; throws on failure.
  std::string QueryWitness(const std::string& sql) const;

  /// `repmgr -f <node's repmgr.conf> args...` with an ssh that runs its command on this host
  /// (every node is here); throws with the output on failure. Returns the output.
  std::string Repmgr(size_t index, const std::vector<std::string>& args) const;
  /// The same command, its exit code and output whatever they are (-1 past `timeout`); safe to
  /// call from another thread while the cluster stands.
  CommandResult TryRepmgr(size_t index, const std::vector<std::string>& args,
                          std::chrono::seconds timeout) const;
  /// psql as postgres on the node's database `database`; throws on failure.
  std::string Query(size_t index, const std::string& sql,
                    const std::string& database = "repmgr") const;
  /// True when the node answers and is not in recovery.
  bool Writable(size_t index) const;
  /// How many standbys the node's pg_stat_replication shows streaming (0 when it does not
  /// answer). `repmgr standby switchover` refuses a standby not attached to the primary yet.
  size_t StreamingStandbys(size_t index) const;
  /// Waits until every other node streams from node `primary`. One that has not after
  /// `patience` is printed (Describe()) and put back by hand: a standby running follows with
  /// `repmgr standby follow`, a server that is down rejoins with `repmgr node rejoin`; then
  /// the wait goes on up to `timeout`. Returns whether all stream.
  bool AwaitStandbys(size_t primary, std::chrono::seconds patience,
                     std::chrono::seconds timeout) const;
  /// For a failure's log: `repmgr cluster show` run on node `from`, and for each node whether it
  /// answers, whether it is in recovery, who streams from it, and the end of its server log.
  std::string Describe(size_t from) const;

  /// SIGSTOP of the postmaster and its children (a frozen host); Thaw() resumes them.
  void Freeze(size_t index);
  void Thaw(size_t index);

 private:
  void Initdb(Node& node);
  void WriteRepmgrConf(const Node& node) const;
  void StartServer(const Node& node) const;
  void StartRepmgrd();
  std::vector<std::string> RepmgrArgv(const Node& node, const std::vector<std::string>& args) const;

  std::unique_ptr<TempDir> root_;
  std::string password_file_;
  std::string Psql(const Node& node, const std::string& sql, const std::string& database) const;
  void AddWitness();

  std::vector<Node> nodes_;
  std::optional<Node> witness_;  ///< repmgr's witness node, never one of nodes_
  bool repmgrd_ = false;
  std::vector<pid_t> daemons_;
};

}  // namespace sbd::testing
