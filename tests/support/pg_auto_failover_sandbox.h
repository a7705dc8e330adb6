// A throw-away pg_auto_failover 2.0 formation for integration tests: a monitor and PostgreSQL 15
// nodes run by `pg_autoctl` as the postgres OS user, on free loopback ports, with the monitor's
// timeouts cut to seconds. Each node's PostgreSQL listens on 127.0.0.1 only; the monitor and the
// other nodes reach it through a TCP forwarder on 127.0.0.2 (its registered nodehost), which a
// test can cut to partition the node from the formation while clients on 127.0.0.1 still reach
// it; each keeper reaches the monitor through a forwarder of its own, cut to partition the
// keeper from the monitor.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace sbd::testing {

/// Forwards connections from address:listen_port (default 127.0.0.2:port) to 127.0.0.1:port.
/// Cut() refuses new ones and closes the live ones; Mend() accepts again. Thread-safe;
/// non-copyable.
class LoopbackForwarder {
 public:
  explicit LoopbackForwarder(int port, const std::string& address = "127.0.0.2",
                             int listen_port = 0);
  ~LoopbackForwarder();
  LoopbackForwarder(const LoopbackForwarder&) = delete;
  LoopbackForwarder& operator=(const LoopbackForwarder&) = delete;
  void Cut();
  void Mend();
  int listen_port() const { return listen_port_; }

 private:
  struct State;
  std::shared_ptr<State> state_;
  int listen_port_;
};

/// One node: its name in the monitor, its port, its data directory, its pg_autoctl.
struct PafNode {
  std::string name;
  int port = 0;
  std::string pgdata;
  pid_t pid = -1;  ///< the top pg_autoctl process
  std::unique_ptr<LoopbackForwarder> forwarder;
  /// The keeper's way to the monitor (a port of its own on 127.0.0.1): cut with `forwarder`,
  /// the node is partitioned from the monitor too, and its keeper knows it.
  std::unique_ptr<LoopbackForwarder> monitor_link;
  /// "host=127.0.0.1 port=P user=postgres dbname=postgres": the node's PostgreSQL, directly.
  std::string Dsn() const;
};

/// The formation `default`, group 0. Not thread-safe; non-copyable. The destructor stops
/// every pg_autoctl (thawing frozen ones first).
class PafFormation {
 public:
  /// Creates the monitor and `nodes` nodes, and waits until one is primary and the others
  /// secondary. Throws std::runtime_error with the logs on failure.
  explicit PafFormation(int nodes = 2);
  ~PafFormation();
  PafFormation(const PafFormation&) = delete;
  PafFormation& operator=(const PafFormation&) = delete;

  /// "host=127.0.0.1 port=M user=autoctl_node dbname=pg_auto_failover sslmode=disable".
  std::string MonitorDsn() const;
  std::vector<PafNode>& nodes() { return nodes_; }
  PafNode& Node(const std::string& name);

  /// The node whose reported and goal states are both primary, "" when none (or the monitor
  /// is unreadable).
  std::string Primary() const;
  /// True when one node is primary and every other one secondary, reported and assigned.
  bool Settled() const;
  /// Waits (with a deadline) until Settled(); throws with the states past it.
  void WaitSettled(std::chrono::seconds deadline) const;
  /// `pg_autoctl show state` against the monitor, its exit code and output whatever they are;
  /// safe to call from another thread while the formation stands.
  CommandResult ShowState(std::chrono::seconds timeout) const;
  /// `pg_autoctl perform switchover` (it waits for the new primary); throws on failure.
  void Switchover();
  /// Stops or starts the monitor's pg_autoctl (and its PostgreSQL).
  void StopMonitor();
  void StartMonitor();
  /// SIGSTOPs or SIGCONTs the pg_autoctl processes of a node (its PostgreSQL keeps running).
  void FreezeKeeper(const std::string& name);
  void ThawKeeper(const std::string& name);
  /// The monitor's nodes as "name:goal/reported ...", for messages.
  std::string States() const;
  /// A monitor query as the postgres superuser; "" on failure.
  std::string MonitorQuery(const std::string& sql) const;
  /// The last 4000 bytes of a node's pg_autoctl log ("monitor" for the monitor's), for messages.
  std::string Log(const std::string& name) const;

 private:
  pid_t SpawnAutoctl(const std::vector<std::string>& args, const std::string& log);

  std::unique_ptr<TempDir> root_;
  std::string dir_;
  int monitor_port_ = 0;
  pid_t monitor_pid_ = -1;
  std::vector<PafNode> nodes_;
  std::vector<pid_t> frozen_;
};

}  // namespace sbd::testing
