#include "tests/support/pg_sandbox.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <stdexcept>

#include "tests/support/files.h"
#include "tests/support/process.h"

namespace sbd::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kLogTailLines = 40;
const seconds kStartTimeout{60};  // pg_ctl -t
const milliseconds kReadyDeadline{30000};
const milliseconds kStreamingDeadline{60000};
const milliseconds kSignalDeadline{5000};

bool Contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

// Settings shared by every server of the sandbox (pg_basebackup copies them to replicas). The
// per-instance ones live in sandbox_instance.conf, which each instance rewrites for itself.
const char* kCommonConf = R"(
# ---- splitbrain-detector test sandbox ----
listen_addresses = '127.0.0.1'
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
wal_keep_size = '128MB'
hot_standby = on
fsync = off                # tests only
shared_buffers = '32MB'
max_connections = 50
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
include_if_exists = 'sandbox_instance.conf'
)";

const char* kPgHba = R"(# splitbrain-detector test sandbox
# TYPE  DATABASE     USER      ADDRESS         METHOD
local   all          all                       trust
host    replication  postgres  127.0.0.1/32    trust
host    all          postgres  127.0.0.1/32    trust
host    all          all       127.0.0.1/32    scram-sha-256
)";

}  // namespace

// ---------------------------------------------------------------------------------------------
// Binaries

const std::string& PgBinDir() {
  static const std::string dir = [] {
    if (const char* env = std::getenv("SBD_PG_BINDIR"); env != nullptr && *env != '\0') {
      return std::string(env);
    }
    const std::string preferred = "/usr/lib/postgresql/15/bin";
    if (::access((preferred + "/initdb").c_str(), X_OK) == 0) return preferred;
    std::string best;
    int best_version = -1;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
      const std::string version = entry.path().filename().string();
      char* end = nullptr;
      long v = std::strtol(version.c_str(), &end, 10);
      if (end == version.c_str() || *end != '\0') continue;
      std::string bin = entry.path().string() + "/bin";
      if (v > best_version && ::access((bin + "/initdb").c_str(), X_OK) == 0) {
        best = bin;
        best_version = static_cast<int>(v);
      }
    }
    return best;
  }();
  return dir;
}

std::string PgBin(const std::string& tool) {
  return PgBinDir().empty() ? tool : PgBinDir() + "/" + tool;
}

std::vector<std::string> PsqlCommand(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {PgBin("psql"), "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

bool TrySuperuserQuery(const std::string& socket_dir, int port, const std::string& sql,
                       seconds timeout, std::string* out) {
  const std::vector<std::string> argv =
      PsqlCommand({"-h", socket_dir, "-p", std::to_string(port), "-U", "postgres", "-d", "postgres",
                   "-c", sql});
  SplitCommandResult r = RunCommandSplit(argv, /*as_postgres=*/true, timeout);
  if (r.exit_code != 0) {
    if (out != nullptr) *out = DescribeCommandRun(argv, r.exit_code, r.err + r.out);
    return false;
  }
  if (out != nullptr) *out = Trim(r.out);
  return true;
}

bool MonitorLoginWorks(const std::string& dsn, const std::string& user, seconds timeout,
                       std::string* detail) {
  const std::vector<std::string> argv =
      PsqlCommand({"-d", dsn, "-c",
                   "SELECT current_user, system_identifier FROM pg_control_system();"
                   "SELECT checkpoint_lsn FROM pg_control_checkpoint();"});
  SplitCommandResult r = RunCommandSplit(argv, /*as_postgres=*/true, timeout);
  if (r.exit_code == 0 && r.out.find(user) != std::string::npos) return true;
  if (detail != nullptr) *detail = DescribeCommandRun(argv, r.exit_code, r.err + r.out);
  return false;
}

// ---------------------------------------------------------------------------------------------
// PgInstance

PgInstance::PgInstance(std::string name, std::string dir, int port)
    : name_(std::move(name)),
      dir_(std::move(dir)),
      data_dir_(dir_ + "/data"),
      log_file_(dir_ + "/server.log"),
      port_(port) {}

PgInstance::~PgInstance() {
  try {
    Stop();
  } catch (...) {
  }
}

std::string PgInstance::MonitorDsn() const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " user=" + PgSandbox::kMonitorUser +
         " dbname=postgres";
}

std::string PgInstance::SuperuserDsn() const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=postgres";
}

std::string PgInstance::LogTail(int lines) const { return Tail(log_file_, lines); }

void PgInstance::Fail(const std::string& what, const std::string& detail) const {
  std::string msg = "[" + name_ + " port " + std::to_string(port_) + "] " + what;
  if (!detail.empty()) msg += "\n" + detail;
  if (msg.back() != '\n') msg += '\n';
  msg += "--- last lines of " + log_file_ + " ---\n" + LogTail(kLogTailLines);
  throw std::runtime_error(msg);
}

pid_t PgInstance::PostmasterPid() const {
  const pid_t pid = ReadPidFile(data_dir_ + "/postmaster.pid");
  if (pid <= 0) {
    throw std::runtime_error("[" + name_ + "] no postmaster.pid in " + data_dir_ +
                             " (server not running?)");
  }
  return pid;
}

void PgInstance::WriteInstanceConf() const {
  std::string conf = "# written by the splitbrain-detector test sandbox for " + name_ + "\n";
  conf += "port = " + std::to_string(port_) + "\n";
  conf += "unix_socket_directories = '" + dir_ + "'\n";
  conf += "cluster_name = '" + name_ + "'\n";  // also the walreceiver's application_name
  const std::string path = data_dir_ + "/sandbox_instance.conf";
  WriteFile(path, conf, 0600, /*append=*/false);
  GiveToPostgres(path);
}

void PgInstance::StartServer(bool allow_port_change) {
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    WriteInstanceConf();
    const size_t log_offset = ReadFile(log_file_).size();
    const std::vector<std::string> argv = {PgBin("pg_ctl"),
                                           "-w",
                                           "-t",
                                           std::to_string(kStartTimeout.count()),
                                           "-D",
                                           data_dir_,
                                           "-l",
                                           log_file_,
                                           "-o",
                                           "-p " + std::to_string(port_),
                                           "start"};
    CommandResult r = RunCommand(argv, /*as_postgres=*/true, kStartTimeout + seconds(30));
    if (r.exit_code == 0) break;

    // Do not leave a half-started server behind.
    if (::access((data_dir_ + "/postmaster.pid").c_str(), F_OK) == 0) {
      RunCommand({PgBin("pg_ctl"), "-D", data_dir_, "-m", "immediate", "-w", "-t", "30", "stop"},
                 true, seconds(60));
    }
    const std::string new_log = ReadFile(log_file_).substr(log_offset);
    const bool port_taken = Contains(new_log, "could not bind") ||
                            Contains(new_log, "Address already in use") ||
                            Contains(new_log, "could not create any TCP/IP sockets");
    if (allow_port_change && port_taken && attempt < kAttempts) {
      port_ = FreeLoopbackPort();
      continue;
    }
    Fail("pg_ctl start failed", DescribeCommandRun(argv, r.exit_code, r.output));
  }
  running_ = true;

  std::string last_error;
  bool ready = WaitFor(
      [&] {
        try {
          return Query("SELECT 1", seconds(10)) == "1";
        } catch (const std::exception& e) {
          last_error = e.what();
          return false;
        }
      },
      kReadyDeadline, milliseconds(100));
  if (!ready) Fail("server started but does not accept connections", last_error);
}

void PgInstance::Start() {
  if (running_) return;
  StartServer(/*allow_port_change=*/false);
}

std::string PgInstance::Query(const std::string& sql, seconds timeout) const {
  std::string out;
  if (!TrySuperuserQuery(dir_, port_, sql, timeout, &out)) Fail("query failed: " + sql, out);
  return out;
}

void PgInstance::Freeze() {
  if (!running_) Fail("Freeze() on a stopped server", "");
  const pid_t postmaster = PostmasterPid();
  auto stop = [&](pid_t pid) {
    if (std::find(frozen_pids_.begin(), frozen_pids_.end(), pid) != frozen_pids_.end()) return;
    if (::kill(pid, SIGSTOP) == 0) frozen_pids_.push_back(pid);
  };
  // The postmaster first, so that it cannot fork new children while we stop the existing ones.
  stop(postmaster);
  if (!WaitFor([&] { return ProcessState(postmaster) == 'T'; }, kSignalDeadline, milliseconds(5))) {
    Fail("postmaster did not stop on SIGSTOP", "");
  }
  // Repeat the scan until it finds nothing new (a child forked just before the stop).
  for (int round = 0; round < 20; ++round) {
    size_t before = frozen_pids_.size();
    for (pid_t pid : ProcessTree(postmaster)) stop(pid);
    if (frozen_pids_.size() == before) break;
  }
  bool all_stopped = WaitFor(
      [&] {
        for (pid_t pid : frozen_pids_) {
          char st = ProcessState(pid);
          if (st != 'T' && st != 't' && st != 'Z' && st != '\0') return false;
        }
        return true;
      },
      kSignalDeadline, milliseconds(5));
  if (!all_stopped) Fail("not every server process stopped on SIGSTOP", "");
}

void PgInstance::Thaw() {
  std::vector<pid_t> pids(frozen_pids_.rbegin(), frozen_pids_.rend());  // children first
  if (running_) {
    try {
      for (pid_t pid : ProcessTree(PostmasterPid())) {
        if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
      }
    } catch (const std::exception&) {
      // No pid file: nothing beyond what we stopped ourselves.
    }
  }
  for (pid_t pid : pids) ::kill(pid, SIGCONT);
  frozen_pids_.clear();
  WaitFor(
      [&] {
        for (pid_t pid : pids) {
          char st = ProcessState(pid);
          if (st == 'T') return false;
        }
        return true;
      },
      kSignalDeadline, milliseconds(5));
}

void PgInstance::Promote() {
  if (!running_) Fail("Promote() on a stopped server", "");
  const std::vector<std::string> argv = {
      PgBin("pg_ctl"), "-w",     "-t", std::to_string(kStartTimeout.count()), "-D",
      data_dir_,       "promote"};
  CommandResult r = RunCommand(argv, /*as_postgres=*/true, kStartTimeout + seconds(30));
  if (r.exit_code != 0)
    Fail("pg_ctl promote failed", DescribeCommandRun(argv, r.exit_code, r.output));
  std::string last;
  bool writable = WaitFor(
      [&] {
        try {
          last = Query("SELECT pg_is_in_recovery()", seconds(10));
        } catch (const std::exception& e) {
          last = e.what();
        }
        return last == "f";
      },
      kReadyDeadline, milliseconds(50));
  if (!writable) Fail("promoted server is still in recovery", last);
}

void PgInstance::Stop() {
  if (!running_) return;
  if (frozen()) Thaw();
  if (::access((data_dir_ + "/postmaster.pid").c_str(), F_OK) != 0) {
    running_ = false;  // already gone (crashed or killed by the test)
    return;
  }
  pid_t postmaster = -1;
  try {
    postmaster = PostmasterPid();
  } catch (const std::exception&) {
  }
  for (const char* mode : {"fast", "immediate"}) {
    CommandResult r =
        RunCommand({PgBin("pg_ctl"), "-D", data_dir_, "-m", mode, "-w", "-t", "60", "stop"}, true,
                   seconds(90));
    if (r.exit_code == 0) {
      running_ = false;
      return;
    }
    if (::access((data_dir_ + "/postmaster.pid").c_str(), F_OK) != 0) {
      running_ = false;
      return;
    }
  }
  // Last resort: kill the whole tree.
  bool gone = KillProcessTree(postmaster, kSignalDeadline);
  running_ = false;
  if (!gone) Fail("could not stop the server, even with SIGKILL", "");
}

// ---------------------------------------------------------------------------------------------
// PgSandbox

PgSandbox::PgSandbox() {
  if (::access(PgBin("initdb").c_str(), X_OK) != 0 ||
      ::access(PgBin("pg_ctl").c_str(), X_OK) != 0) {
    throw std::runtime_error(
        "PgSandbox: PostgreSQL server binaries not found (looked in '" + PgBinDir() +
        "'); install postgresql-15 (scripts/install-deps) or set SBD_PG_BINDIR");
  }
  if (RunningAsRoot()) PostgresUser();  // fail early and clearly

  root_ = std::make_unique<TempDir>("sbd-pg");  // 0755, given to postgres when we are root
  password_file_ = root() + "/monitor.password";
  int fd = ::open(password_file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("open " + password_file_ + ": " + strerror(errno));
  ::close(fd);
  WriteFile(password_file_, std::string(kMonitorPassword) + "\n", 0600, /*append=*/false);
}

PgSandbox::~PgSandbox() {
  // Thaw everything first: a frozen standby could otherwise stall its upstream's shutdown.
  for (auto& inst : instances_) {
    try {
      if (inst->frozen()) inst->Thaw();
    } catch (...) {
    }
  }
  for (auto it = instances_.rbegin(); it != instances_.rend(); ++it) {
    try {
      (*it)->Stop();
    } catch (...) {
    }
  }
  instances_.clear();
  root_.reset();
}

std::string PgSandbox::NewInstanceDir(const std::string& name) const {
  static const std::regex kValidName("[A-Za-z0-9_-]{1,32}");
  if (!std::regex_match(name, kValidName)) {
    throw std::invalid_argument("PgSandbox: invalid instance name '" + name +
                                "' (1-32 characters of [A-Za-z0-9_-])");
  }
  for (const auto& inst : instances_) {
    if (inst->name() == name) {
      throw std::invalid_argument("PgSandbox: instance '" + name + "' already exists");
    }
  }
  std::string dir = root() + "/" + name;
  MakeDir(dir, 0755);
  GiveToPostgres(dir);
  return dir;
}

PgInstance& PgSandbox::StartPrimary(const std::string& name) {
  std::string dir = NewInstanceDir(name);
  instances_.emplace_back(new PgInstance(name, dir, FreeLoopbackPort()));
  PgInstance& pg = *instances_.back();

  const std::vector<std::string> initdb = {PgBin("initdb"),
                                           "-D",
                                           pg.data_dir(),
                                           "-U",
                                           "postgres",
                                           "--auth-local=trust",
                                           "--auth-host=scram-sha-256",
                                           "-E",
                                           "UTF8",
                                           "--locale=C",
                                           "--no-sync",
                                           "--no-instructions"};
  CommandResult r = RunCommand(initdb, /*as_postgres=*/true, seconds(180));
  if (r.exit_code != 0) pg.Fail("initdb failed", DescribeCommandRun(initdb, r.exit_code, r.output));

  WriteFile(pg.data_dir() + "/postgresql.conf", kCommonConf, 0600, /*append=*/true);
  WriteFile(pg.data_dir() + "/pg_hba.conf", kPgHba, 0600, /*append=*/false);
  GiveToPostgres(pg.data_dir() + "/pg_hba.conf");

  pg.StartServer(/*allow_port_change=*/true);

  pg.Query(std::string("CREATE ROLE ") + kMonitorUser + " LOGIN PASSWORD '" + kMonitorPassword +
           "'; GRANT pg_monitor TO " + kMonitorUser + ";");
  const std::string can_read_control =
      pg.Query(std::string("SELECT has_function_privilege('") + kMonitorUser +
               "', 'pg_control_system()', 'EXECUTE') AND has_function_privilege('" + kMonitorUser +
               "', 'pg_control_checkpoint()', 'EXECUTE')");
  if (can_read_control != "t") {
    pg.Query(std::string("GRANT EXECUTE ON FUNCTION pg_control_system(), pg_control_checkpoint() "
                         "TO ") +
             kMonitorUser);
  }

  // The monitoring role must really work the way the detector uses it: TCP, SCRAM, password.
  std::string detail;
  if (!MonitorLoginWorks(pg.MonitorDsn() + " password=" + kMonitorPassword + " connect_timeout=10",
                         kMonitorUser, seconds(30), &detail)) {
    pg.Fail("monitoring role check failed", detail);
  }
  return pg;
}

PgInstance& PgSandbox::StartReplica(const std::string& name, PgInstance& upstream) {
  if (!upstream.running()) {
    throw std::invalid_argument("PgSandbox: upstream '" + upstream.name() + "' is not running");
  }
  std::string dir = NewInstanceDir(name);
  instances_.emplace_back(new PgInstance(name, dir, FreeLoopbackPort()));
  PgInstance& pg = *instances_.back();

  const std::vector<std::string> basebackup = {PgBin("pg_basebackup"),
                                               "-h",
                                               "127.0.0.1",
                                               "-p",
                                               std::to_string(upstream.port()),
                                               "-U",
                                               "postgres",
                                               "-D",
                                               pg.data_dir(),
                                               "--write-recovery-conf",
                                               "--wal-method=stream",
                                               "--checkpoint=fast",
                                               "--no-sync",
                                               "--no-password"};
  CommandResult r = RunCommand(basebackup, /*as_postgres=*/true, seconds(180));
  if (r.exit_code != 0) {
    upstream.Fail("pg_basebackup for replica '" + name + "' failed",
                  DescribeCommandRun(basebackup, r.exit_code, r.output));
  }

  pg.StartServer(/*allow_port_change=*/true);  // rewrites the copied sandbox_instance.conf

  const std::string sql = "SELECT count(*) FROM pg_stat_replication WHERE application_name = '" +
                          name + "' AND state = 'streaming'";
  std::string last;
  bool streaming = WaitFor(
      [&] {
        try {
          last = upstream.Query(sql, seconds(10));
        } catch (const std::exception& e) {
          last = e.what();
        }
        return last == "1";
      },
      kStreamingDeadline, milliseconds(100));
  if (!streaming) {
    pg.Fail("replica is not streaming from '" + upstream.name() + "' after " +
                std::to_string(kStreamingDeadline.count() / 1000) + " s",
            "last answer: " + last + "\n--- last lines of upstream log ---\n" +
                upstream.LogTail(kLogTailLines));
  }
  return pg;
}

}  // namespace sbd::testing
