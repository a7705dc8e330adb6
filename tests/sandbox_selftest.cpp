// Self-test of the PostgreSQL test harness (tests/support): real servers, real replication.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace {

using sbd::testing::CommandResult;
using sbd::testing::PgBin;
using sbd::testing::PgInstance;
using sbd::testing::PgSandbox;
using sbd::testing::RunCommand;

// A fresh TCP connection attempt as postgres, the way a prober would make it.
CommandResult TcpConnect(const PgInstance& pg) {
  return RunCommand({PgBin("psql"), "-X", "-A", "-t", "-q", "-d",
                     pg.SuperuserDsn() + " connect_timeout=2", "-c", "SELECT 1"},
                    /*as_postgres=*/true, std::chrono::seconds(10));
}

}  // namespace

TEST_CASE("RunCommand captures output and exit codes", "[sandbox]") {
  auto ok = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"});
  CHECK(ok.exit_code == 3);
  CHECK(ok.output.find("out") != std::string::npos);
  CHECK(ok.output.find("err") != std::string::npos);

  auto missing = RunCommand({"/nonexistent/program"});
  CHECK(missing.exit_code == 127);

  auto start = std::chrono::steady_clock::now();
  auto slow = RunCommand({"sleep", "30"}, false, std::chrono::seconds(1));
  CHECK(slow.exit_code == -1);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));

  // A daemonized grandchild that keeps the pipe open must not block us.
  start = std::chrono::steady_clock::now();
  auto bg = RunCommand({"sh", "-c", "sleep 20 & echo started"}, false, std::chrono::seconds(15));
  CHECK(bg.exit_code == 0);
  CHECK(bg.output.find("started") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));

  if (sbd::testing::RunningAsRoot()) {
    auto who = RunCommand({"id", "-un"}, /*as_postgres=*/true);
    CHECK(who.exit_code == 0);
    CHECK(who.output == "postgres\n");
  }
}

TEST_CASE("FreeLoopbackPort, ProcessTree and WaitFor", "[sandbox]") {
  int port = sbd::testing::FreeLoopbackPort();
  CHECK(port > 1024);
  CHECK(port != 5432);

  auto tree = sbd::testing::ProcessTree(getpid());
  REQUIRE_FALSE(tree.empty());
  CHECK(tree.front() == getpid());
  CHECK(sbd::testing::ProcessTree(-1).empty());

  int calls = 0;
  CHECK(sbd::testing::WaitFor([&] { return ++calls == 3; }, std::chrono::milliseconds(2000),
                              std::chrono::milliseconds(1)));
  CHECK_FALSE(sbd::testing::WaitFor([] { return false; }, std::chrono::milliseconds(100)));
}

TEST_CASE("PgSandbox: primary, replica, freeze, thaw, promote", "[sandbox]") {
  std::string root;
  std::vector<pid_t> postmasters;
  {
    PgSandbox sandbox;
    root = sandbox.root();

    // Password file: mode 0600, owned by us, password plus newline.
    struct stat st {};
    REQUIRE(stat(sandbox.PasswordFile().c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_uid == geteuid());
    std::ifstream in(sandbox.PasswordFile());
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(content == std::string(PgSandbox::kMonitorPassword) + "\n");

    PgInstance& primary = sandbox.StartPrimary("pg-a");
    PgInstance& replica = sandbox.StartReplica("pg-b", primary);
    CHECK(primary.port() != replica.port());
    CHECK(primary.port() != 5432);
    CHECK(primary.MonitorDsn() == "host=127.0.0.1 port=" + std::to_string(primary.port()) +
                                      " user=splitbrain dbname=postgres");

    CHECK(primary.Query("SELECT pg_is_in_recovery()") == "f");
    CHECK(replica.Query("SELECT pg_is_in_recovery()") == "t");
    const std::string sysid = primary.Query("SELECT system_identifier FROM pg_control_system()");
    CHECK_FALSE(sysid.empty());
    CHECK(replica.Query("SELECT system_identifier FROM pg_control_system()") == sysid);
    CHECK(primary.Query("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") ==
          "1");
    CHECK(primary.Query("SELECT rolname FROM pg_roles WHERE pg_has_role(rolname, 'pg_monitor', "
                        "'member') AND rolname = 'splitbrain'") == "splitbrain");

    // The monitoring role works with the password over TCP, on the replica too.
    auto mon = RunCommand({PgBin("psql"), "-X", "-A", "-t", "-q", "-d",
                           replica.MonitorDsn() + " password=" + PgSandbox::kMonitorPassword, "-c",
                           "SELECT system_identifier FROM pg_control_system()"},
                          true, std::chrono::seconds(20));
    CHECK(mon.exit_code == 0);
    CHECK(mon.output == sysid + "\n");
    auto bad = RunCommand({PgBin("psql"), "-X", "-A", "-t", "-q", "-d",
                           primary.MonitorDsn() + " password=wrong", "-c", "SELECT 1"},
                          true, std::chrono::seconds(20));
    CHECK(bad.exit_code != 0);

    // Freeze: the postmaster and every child are stopped; new connections hang.
    REQUIRE(TcpConnect(primary).exit_code == 0);
    const pid_t postmaster = primary.PostmasterPid();
    const auto tree = sbd::testing::ProcessTree(postmaster);
    CHECK(tree.size() >= 5);  // checkpointer, bgwriter, walwriter, walsender, ...
    primary.Freeze();
    CHECK(primary.frozen());
    for (pid_t pid : tree) {
      char state = sbd::testing::ProcessState(pid);  // stopped, or exited before the freeze
      INFO("pid " << pid << " state '" << state << "'");
      CHECK((state == 'T' || state == 'Z' || state == '\0'));
    }
    auto frozen = TcpConnect(primary);
    CHECK(frozen.exit_code != 0);
    INFO(frozen.output);

    primary.Thaw();
    CHECK_FALSE(primary.frozen());
    CHECK(sbd::testing::ProcessState(postmaster) != 'T');
    CHECK(TcpConnect(primary).exit_code == 0);
    CHECK(primary.Query("SELECT 42") == "42");

    // Promote: a second writable primary of the same cluster (split brain).
    CHECK_THROWS(replica.Query("CREATE TABLE before_promote (x int)"));
    replica.Promote();
    CHECK(replica.Query("SELECT pg_is_in_recovery()") == "f");
    CHECK(primary.Query("SELECT pg_is_in_recovery()") == "f");
    replica.Query("CREATE TABLE after_promote (x int); INSERT INTO after_promote VALUES (1)");
    CHECK(replica.Query("SELECT count(*) FROM after_promote") == "1");
    CHECK(replica.Query("SELECT system_identifier FROM pg_control_system()") == sysid);

    // Errors carry the server log tail.
    try {
      primary.Query("SELECT * FROM no_such_table");
      FAIL("expected an exception");
    } catch (const std::runtime_error& e) {
      std::string msg = e.what();
      CHECK(msg.find("no_such_table") != std::string::npos);
      CHECK(msg.find("server.log") != std::string::npos);
    }

    // Stop is idempotent; a stopped server can be started again on the same port; freezing
    // before the sandbox goes away must not stall cleanup.
    const int port = replica.port();
    replica.Stop();
    replica.Stop();
    CHECK_FALSE(replica.running());
    CHECK(TcpConnect(replica).exit_code != 0);
    replica.Start();
    CHECK(replica.port() == port);
    CHECK(replica.Query("SELECT count(*) FROM after_promote") == "1");
    postmasters = {primary.PostmasterPid(), replica.PostmasterPid()};
    replica.Freeze();
    primary.Freeze();
  }
  // The destructor stopped everything and removed the directory.
  CHECK(access(root.c_str(), F_OK) != 0);
  for (pid_t pid : postmasters) {
    char state = sbd::testing::ProcessState(pid);  // gone, or a zombie waiting for init
    CHECK((state == '\0' || state == 'Z'));
  }
}
