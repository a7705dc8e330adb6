// Throw-away Patroni 3.0 clusters for integration tests: one etcd 3.4 server and N Patroni members,
// each managing its own PostgreSQL 15, all on loopback, on free non-default ports.
//
// Patroni and PostgreSQL run as the `postgres` OS user when the test runs as root (they are
// started with fork/exec and setuid, not through runuser, so that the pid we keep IS the patroni
// python process). etcd runs as the current user. Every process started here is stopped by a
// destructor (thawed first if it was SIGSTOPped); the children also get SIGTERM from the kernel
// (PR_SET_PDEATHSIG) if the thread that started them dies, e.g. when the test binary crashes, so
// create clusters from the test's main thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace sbd::testing {

/// The Patroni sandbox's former name for TempDir (mode 0755, owned by postgres when we are root,
/// so that Patroni can create its member dirs in it). Give it a prefix, e.g. "sbd-patroni-".
using ScopedTempDir = TempDir;

/// One etcd 3.4 server on loopback (client + peer ports free), data in `dir`/data, log in
/// `dir`/etcd.log. Runs as the current user. Non-copyable.
class EtcdServer {
 public:
  /// Creates `dir` if needed, starts etcd and waits (deadline) until GET /health says
  /// {"health":"true"} and POST /v3/kv/range answers. Throws with the log tail on failure.
  explicit EtcdServer(const std::string& dir);
  ~EtcdServer();  // Stop(); never throws. Leaves `dir` in place.
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  /// "http://127.0.0.1:PORT" (client URL).
  std::string endpoint() const;
  int client_port() const { return client_port_; }
  int peer_port() const { return peer_port_; }
  const std::string& dir() const { return dir_; }
  const std::string& log_file() const { return log_file_; }
  /// pid of the etcd process, -1 when stopped.
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  /// SIGCONT + SIGTERM, then wait (deadline; SIGKILL as a last resort). Idempotent.
  void Stop();
  /// Starts again on the same ports and data dir and waits until ready. No-op when running.
  void Start();

  /// POST /v3/<api> (e.g. "kv/range") with a JSON body; returns the raw response body. Throws
  /// on a transport error or a non-200 status.
  std::string PostV3(const std::string& api, const std::string& json_body) const;
  /// Value of `key` decoded from base64, or "" when absent (throws on transport errors).
  std::string Get(const std::string& key) const;

  /// The last `lines` lines of the etcd log (for error messages).
  std::string LogTail(int lines = 40) const;

 private:
  void Spawn();
  bool Ready() const;
  // Spawn(), then wait (deadline) until Ready(). False, with pid_ = -1, when etcd exited first
  // (`exited`, and `how`) or is not ready in time (then it is stopped).
  bool SpawnAndWait(bool* exited, std::string* how);

  std::string dir_;
  std::string data_dir_;
  std::string log_file_;
  int client_port_;
  int peer_port_;
  pid_t pid_ = -1;
};

/// One Patroni 3.0 member: a patroni process (as postgres) managing a PostgreSQL 15.
struct PatroniMember {
  std::string name;  // node1, node2, ...
  int pg_port = 0;
  int rest_port = 0;
  std::string dir;          // <root>/<name>: config, log, pgpass and the unix socket
  std::string data_dir;     // <dir>/data
  std::string config_file;  // <dir>/patroni.yml
  std::string log_file;     // <dir>/patroni.log: Patroni's and PostgreSQL's stderr
  pid_t patroni_pid = -1;   // the patroni (python) process itself; -1 when not running
  bool frozen = false;      // FreezePatroni() without ThawPatroni()

  /// "http://127.0.0.1:REST_PORT"
  std::string RestUrl() const;
  /// "host=127.0.0.1 port=PG_PORT user=splitbrain dbname=postgres" (no password; see
  /// PatroniCluster::PasswordFile()).
  std::string MonitorDsn() const;
  /// Superuser over TCP (trusted from 127.0.0.1, no password needed).
  std::string SuperuserDsn() const;
};

class ZooKeeperServer;
class ZooKeeperEnsemble;

/// A Patroni cluster of N members (node1..nodeN) using one DCS: etcd through its v3 API
/// (`etcd3:`) or ZooKeeper (`zookeeper:`, through kazoo), scope `scope`, namespace /service. The
/// DCS server must outlive the cluster. Not thread-safe.
class PatroniCluster {
 public:
  static constexpr const char* kMonitorPassword = "sbd-test-secret";  // same as PgSandbox's
  static constexpr const char* kMonitorUser = "splitbrain";
  static constexpr const char* kNamespace = "/service";

  /// Creates root_dir if needed, writes one config per member under root_dir/<name>, starts
  /// node1 and waits (deadline) until it is the leader and running, then starts the others
  /// (so node1 is always the initial leader). Does not wait for the replicas: call WaitHealthy().
  /// Requires loop_wait + 2 * retry_timeout <= ttl (Patroni's rule); throws otherwise.
  PatroniCluster(const std::string& root_dir, const std::string& scope, const EtcdServer& etcd,
                 int members = 3, int ttl_seconds = 10, int loop_wait_seconds = 1,
                 int retry_timeout_seconds = 3);
  /// The same on ZooKeeper: the ttl is the members' session timeout. The scope's znodes are left
  /// on the server at the end (give each cluster its own scope or its own server).
  PatroniCluster(const std::string& root_dir, const std::string& scope,
                 const ZooKeeperServer& zookeeper, int members = 3, int ttl_seconds = 10,
                 int loop_wait_seconds = 1, int retry_timeout_seconds = 3);
  /// The same on a ZooKeeper ensemble: Patroni is given every server.
  PatroniCluster(const std::string& root_dir, const std::string& scope, ZooKeeperEnsemble& ensemble,
                 int members = 3, int ttl_seconds = 10, int loop_wait_seconds = 1,
                 int retry_timeout_seconds = 3);
  /// Thaws anything frozen, SIGTERMs every patroni at once and waits for them (SIGKILL as a last
  /// resort), makes sure every postmaster is gone, deletes the etcd keys /service/<scope>/ (when
  /// etcd runs) and removes the member dirs it created. Removes nothing outside root_dir.
  ~PatroniCluster();
  PatroniCluster(const PatroniCluster&) = delete;
  PatroniCluster& operator=(const PatroniCluster&) = delete;

  /// Waits until GET /cluster (asked of any non-frozen member) shows every member, exactly one
  /// with role leader and state running, every other one role replica with state
  /// streaming/running, and the leader's pg_stat_replication shows all replicas streaming. The
  /// first successful call also creates the monitoring role on the leader (idempotent) and waits
  /// until it works over TCP with kMonitorPassword on every member. Throws with the logs on
  /// timeout.
  void WaitHealthy(std::chrono::seconds deadline = std::chrono::seconds(90));

  std::vector<PatroniMember>& members() { return members_; }
  const std::vector<PatroniMember>& members() const { return members_; }
  PatroniMember& member(const std::string& name);
  const PatroniMember& member(const std::string& name) const;

  /// Waits until the cluster is healthy (like WaitHealthy); members that are still not streaming
  /// after `grace` are reinitialized with Reinit() (a fresh pg_basebackup from the leader), then it
  /// waits again. Needed after a thawed Patroni leader: Patroni 3.0.2 may then take the leader key
  /// back (its update_leader overwrites the key unconditionally, fixed in Patroni 3.0.3), demote
  /// the member promoted meanwhile and leave replicas on a timeline newer than the leader's, which
  /// never stream again by themselves. Returns the reinitialized members (usually none).
  std::vector<std::string> Heal(std::chrono::seconds deadline = std::chrono::seconds(180),
                                std::chrono::seconds grace = std::chrono::seconds(30));
  /// `patronictl reinit --force --wait` of one member. Throws on failure.
  void Reinit(const std::string& name, std::chrono::seconds deadline = std::chrono::seconds(120));

  /// Members whose PostgreSQL answers pg_is_in_recovery() = f right now (over the unix socket,
  /// 5 s timeout each). A split brain shows two.
  std::vector<std::string> WritableMembers() const;

  /// Current leader's name according to GET /cluster of a non-frozen member, falling back (on
  /// etcd) to the key /service/<scope>/leader. "" when there is none.
  std::string Leader() const;

  /// SIGSTOP of the member's patroni process only (its PostgreSQL keeps running); waits until the
  /// process is stopped. ThawPatroni sends SIGCONT. Both are idempotent.
  void FreezePatroni(const std::string& name);
  void ThawPatroni(const std::string& name);

  /// `patronictl switchover --force` (to `candidate`, or any replica when empty), then waits
  /// (deadline) until a different leader is running writable and the cluster is healthy again.
  /// Returns the new leader.
  std::string Switchover(const std::string& candidate = "",
                         std::chrono::seconds deadline = std::chrono::seconds(90));
  /// `patronictl pause --wait` (maintenance mode: Patroni leaves PostgreSQL alone, a replica
  /// promoted by hand stays a primary) or `patronictl resume --wait`. Throws on failure.
  void SetPaused(bool paused, std::chrono::seconds deadline = std::chrono::seconds(60));
  /// `patronictl failover --candidate <candidate> --force`, then waits like Switchover.
  std::string Failover(const std::string& candidate,
                       std::chrono::seconds deadline = std::chrono::seconds(90));

  /// Runs `sql` with psql as the postgres superuser over the member's unix socket (-XAtq,
  /// ON_ERROR_STOP) and returns stdout trimmed. Throws std::runtime_error on error or timeout.
  std::string Query(const std::string& name, const std::string& sql,
                    std::chrono::seconds timeout = std::chrono::seconds(30)) const;
  /// Like Query, but returns false (and `error`) instead of throwing.
  bool TryQuery(const std::string& name, const std::string& sql, std::string* out,
                std::chrono::seconds timeout = std::chrono::seconds(10)) const;

  /// GET <member REST>/<path> (e.g. "cluster", "patroni"); returns the body, whatever the status
  /// (Patroni answers 503 on some endpoints for replicas). Throws on transport errors/timeouts.
  std::string RestGet(const std::string& name, const std::string& path) const;

  const std::string& scope() const { return scope_; }
  const std::string& root_dir() const { return root_dir_; }
  /// "/service/<scope>/"
  std::string KeyPrefix() const;
  /// A 0600 file (owned by the current user) with kMonitorPassword + "\n".
  std::string PasswordFile() const { return password_file_; }
  /// Last lines of every member's log (and etcd's), for error messages.
  std::string DescribeLogs(int lines = 30) const;

 private:
  PatroniCluster(const std::string& root_dir, const std::string& scope, const EtcdServer* etcd,
                 std::vector<const ZooKeeperServer*> zookeepers, int members, int ttl_seconds,
                 int loop_wait_seconds, int retry_timeout_seconds);
  void WriteConfig(const PatroniMember& m) const;
  // Patroni's zookeeper.hosts items: "'127.0.0.1:A', '127.0.0.1:B'".
  std::string ZooKeeperHosts() const;
  // The leader as GET /cluster of a non-frozen member says; "" when none answers.
  std::string RestLeader() const;
  // The leader as the DCS says (etcd's key; ZooKeeper: as the members' REST API says).
  std::string DcsLeader() const;
  std::string MoveLeader(const std::string& how, const std::string& candidate,
                         std::chrono::seconds deadline);
  void StartPatroni(PatroniMember& m);
  /// Before the cluster was first healthy: a member whose Patroni exited because a port it was
  /// given was taken in the meantime (FreeLoopbackPort only says a port was free when asked)
  /// gets two new ports, its config rewritten, and is started again. False when the exit had
  /// another cause or the member was moved 3 times already.
  bool RestartOnFreshPorts(PatroniMember& m);
  void StopAll() noexcept;
  [[noreturn]] void Fail(const std::string& what) const;
  // Parsed health check; fills `why` when not healthy.
  bool Healthy(std::string* why) const;
  void EnsureMonitorRole();

  std::string root_dir_;
  std::string scope_;
  const EtcdServer* etcd_;  // exactly one of etcd_ and zookeepers_ is set
  std::vector<const ZooKeeperServer*> zookeepers_;
  int ttl_;
  int loop_wait_;
  int retry_timeout_;
  std::string password_file_;
  std::vector<PatroniMember> members_;
  std::vector<std::string> created_dirs_;
  bool monitor_role_ready_ = false;
  bool ever_healthy_ = false;  ///< WaitHealthy succeeded once: ports are no longer moved
  std::map<std::string, int> port_moves_;
};

}  // namespace sbd::testing
