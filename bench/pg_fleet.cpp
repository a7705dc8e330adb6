#include "bench/pg_fleet.h"

#include <signal.h>

#include <chrono>
#include <stdexcept>

#include "tests/support/files.h"

namespace sbd::bench {

using std::chrono::milliseconds;
using std::chrono::seconds;

testing::BackgroundOptions DieWithParent(bool as_postgres) {
  testing::BackgroundOptions options;
  options.as_postgres = as_postgres;
  options.die_with_parent = true;
  return options;
}

PgPair::PgPair() {
  primary = &sandbox.StartPrimary("primary");
  replica = &sandbox.StartReplica("replica", *primary);
}

Bouncer::Bouncer(const std::string& dir, const std::map<std::string, int>& aliases,
                 const std::string& auth) {
  testing::MakeDir(dir, 0700);
  testing::GiveToPostgres(dir);
  port_ = testing::FreeLoopbackPort();
  log_ = dir + "/pgbouncer.log";
  const std::string userlist = dir + "/userlist.txt";
  testing::WriteFile(userlist,
                     "\"" + std::string(testing::PgSandbox::kMonitorUser) + "\" \"" +
                         testing::PgSandbox::kMonitorPassword + "\"\n",
                     0600);
  testing::GiveToPostgres(userlist);
  std::string ini = "[databases]\n";
  for (const auto& [alias, pg_port] : aliases) {
    ini += alias + " = host=127.0.0.1 port=" + std::to_string(pg_port) + " dbname=postgres\n";
  }
  ini += "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " + std::to_string(port_) +
         "\nunix_socket_dir =\nlisten_backlog = 4096\nauth_type = " + auth +
         "\nauth_file = " + userlist +
         "\npool_mode = transaction\nmax_client_conn = 12000\ndefault_pool_size = 6\n"
         // The detector sets statement_timeout through `options`; pgbouncer cannot pass it on.
         "ignore_startup_parameters = options, extra_float_digits\n"
         "log_connections = 0\nlog_disconnections = 0\nstats_period = 3600\n";
  const std::string ini_file = dir + "/pgbouncer.ini";
  testing::WriteFile(ini_file, ini, 0600);
  testing::GiveToPostgres(ini_file);
  pid_ = testing::SpawnBackgroundProcess(
      {testing::FindExecutable("pgbouncer", "/usr/sbin"), ini_file}, log_, DieWithParent(true));
  const std::string alias = aliases.begin()->first;
  std::string detail, how;
  const auto outcome = testing::WaitUntilReady(
      pid_,
      [&] {
        return testing::MonitorLoginWorks(
            Dsn(alias) + " password=" + testing::PgSandbox::kMonitorPassword + " connect_timeout=2",
            testing::PgSandbox::kMonitorUser, seconds(5), &detail);
      },
      seconds(30), milliseconds(200), &how);
  if (outcome != testing::StartupOutcome::kReady) {
    throw std::runtime_error("pgbouncer not ready (" + how + "): " + detail + "\n" +
                             testing::Tail(log_, 20));
  }
}

Bouncer::~Bouncer() { testing::StopChildProcess(pid_, SIGTERM, seconds(5)); }

std::string Bouncer::Dsn(const std::string& alias) const {
  return "host=127.0.0.1 port=" + std::to_string(port_) +
         " user=" + testing::PgSandbox::kMonitorUser + " dbname=" + alias;
}

}  // namespace sbd::bench
