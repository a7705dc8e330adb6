// Throw-away PostgreSQL 15 servers for integration tests: primaries, streaming replicas, and the
// faults the detector must see (a frozen host, a promoted replica, a stopped server).
//
// Every server listens on 127.0.0.1 only, on a free non-default port, with its unix socket in its
// own directory under a private temp root. PostgreSQL refuses to run as root, so every PostgreSQL
// command runs as the `postgres` OS user when the test runs as root.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace sbd::testing {

/// Directory holding initdb, pg_ctl, postgres, psql, pg_basebackup: $SBD_PG_BINDIR if set, else
/// /usr/lib/postgresql/15/bin, else the newest /usr/lib/postgresql/*/bin, else "" (use PATH).
const std::string& PgBinDir();
/// Full path of a PostgreSQL tool, e.g. PgBin("psql").
std::string PgBin(const std::string& tool);

/// psql as the sandboxes run it: PgBin("psql") -X -A -t -q -v ON_ERROR_STOP=1 (no psqlrc,
/// unaligned tuples only, quiet, stop at the first error), followed by `args`.
std::vector<std::string> PsqlCommand(const std::vector<std::string>& args);

/// Runs `sql` with psql as the postgres superuser over the unix socket in `socket_dir` (as the
/// postgres OS user when we are root). True with psql's stdout, trimmed, in `out`; false on
/// failure or timeout, with the command line, its exit status and its output in `out`.
bool TrySuperuserQuery(const std::string& socket_dir, int port, const std::string& sql,
                       std::chrono::seconds timeout, std::string* out);

/// Logs in with `dsn` (which carries the password and a connect_timeout) the way the detector
/// does and reads pg_control_system() and pg_control_checkpoint(). True when that works as
/// `user`; otherwise false, with the command line and psql's output in `detail`.
bool MonitorLoginWorks(const std::string& dsn, const std::string& user,
                       std::chrono::seconds timeout, std::string* detail);

class PgSandbox;

/// One running PostgreSQL server. Not thread-safe; non-copyable; owned by its PgSandbox.
class PgInstance {
 public:
  PgInstance(const PgInstance&) = delete;
  PgInstance& operator=(const PgInstance&) = delete;
  ~PgInstance();  // stops the server if still running (never throws)

  const std::string& name() const { return name_; }
  int port() const { return port_; }
  const std::string& data_dir() const { return data_dir_; }
  /// Directory of this instance: holds data_dir(), the server log and the unix socket.
  const std::string& dir() const { return dir_; }
  const std::string& socket_dir() const { return dir_; }
  const std::string& log_file() const { return log_file_; }

  /// libpq DSN for the monitoring role, WITHOUT password:
  /// "host=127.0.0.1 port=N user=splitbrain dbname=postgres".
  std::string MonitorDsn() const;
  /// libpq DSN for the superuser over TCP (trusted from 127.0.0.1, no password needed).
  std::string SuperuserDsn() const;

  /// First line of data_dir/postmaster.pid. Throws if the server is not running.
  pid_t PostmasterPid() const;

  /// SIGSTOPs the postmaster and all its child processes, and waits (with a deadline) until all
  /// of them are stopped: the whole server hangs like a frozen host. TCP connects still complete
  /// in the kernel, but no PostgreSQL handshake is ever answered. Calling it again is harmless.
  void Freeze();
  /// SIGCONTs every process Freeze() stopped (children first), plus the current process tree.
  void Thaw();
  bool frozen() const { return !frozen_pids_.empty(); }

  /// `pg_ctl promote -w`; throws std::runtime_error with the output and the log tail on failure.
  void Promote();
  /// `pg_ctl stop -m fast` (thaws first if frozen; falls back to immediate mode, then SIGKILL).
  /// Idempotent.
  void Stop();
  /// Starts a stopped server again on the same port and waits until it accepts connections.
  void Start();
  bool running() const { return running_; }

  /// Runs `sql` with psql as the postgres superuser over the unix socket (-XAtq, ON_ERROR_STOP)
  /// and returns its stdout with surrounding whitespace trimmed. Throws std::runtime_error with
  /// psql's stderr and the log tail on failure or timeout.
  std::string Query(const std::string& sql,
                    std::chrono::seconds timeout = std::chrono::seconds(30)) const;

  /// The last `lines` lines of the server log (for error messages).
  std::string LogTail(int lines = 40) const;

 private:
  friend class PgSandbox;
  PgInstance(std::string name, std::string dir, int port);

  void WriteInstanceConf() const;
  // pg_ctl start, then wait until the server answers. On the first start a port that was taken
  // in the meantime is replaced by a new free one (a few attempts).
  void StartServer(bool allow_port_change);
  [[noreturn]] void Fail(const std::string& what, const std::string& detail) const;

  std::string name_;
  std::string dir_;
  std::string data_dir_;
  std::string log_file_;
  int port_;
  bool running_ = false;
  std::vector<pid_t> frozen_pids_;  // in the order they were stopped (postmaster first)
};

/// Owns a temp root directory (mkdtemp under /tmp, chowned to postgres) and every instance
/// started in it. The destructor thaws frozen instances, stops all of them and removes the dir.
class PgSandbox {
 public:
  static constexpr const char* kMonitorPassword = "sbd-test-secret";
  static constexpr const char* kMonitorUser = "splitbrain";

  PgSandbox();
  ~PgSandbox();
  PgSandbox(const PgSandbox&) = delete;
  PgSandbox& operator=(const PgSandbox&) = delete;

  /// initdb (-U postgres, --auth-local=trust, --auth-host=scram-sha-256), start on a free port,
  /// listen_addresses=127.0.0.1, unix_socket_directories=<its own dir>, wal_level=replica,
  /// max_wal_senders=10, hot_standby=on, fsync=off; pg_hba: local all all trust, host
  /// replication postgres 127.0.0.1/32 trust, host all postgres 127.0.0.1/32 trust, host all all
  /// 127.0.0.1/32 scram-sha-256. Creates role `splitbrain` LOGIN with password kMonitorPassword,
  /// granted pg_monitor and EXECUTE on pg_control_system()/pg_control_checkpoint(), and checks
  /// that it can log in over TCP with that password and read both functions.
  /// `name`: 1-32 characters of [A-Za-z0-9_-], unique within the sandbox.
  PgInstance& StartPrimary(const std::string& name);

  /// pg_basebackup -R -X stream from `upstream` (a primary, or a standby for cascading) into a
  /// new data dir, start it on a free port, and wait (with a deadline) until upstream's
  /// pg_stat_replication shows it streaming (application_name = name via cluster_name).
  PgInstance& StartReplica(const std::string& name, PgInstance& upstream);

  /// File (mode 0600, owned by the current user) holding kMonitorPassword and a newline.
  const std::string& PasswordFile() const { return password_file_; }
  /// The sandbox's temp root directory.
  const std::string& root() const { return root_->path(); }

  const std::vector<std::unique_ptr<PgInstance>>& instances() const { return instances_; }

 private:
  std::string NewInstanceDir(const std::string& name) const;

  std::unique_ptr<TempDir> root_;
  std::string password_file_;
  std::vector<std::unique_ptr<PgInstance>> instances_;
};

}  // namespace sbd::testing
