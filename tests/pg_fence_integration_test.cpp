// The PostgreSQL fence (detector/remediation/pg_fence.h) against real PostgreSQL 15 servers
// started by tests/support/pg_sandbox: a primary with a streaming replica, a replica, roles
// with and without the grants, a listener that never answers and a SIGSTOPped server.
#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "detector/remediation/pg_fence.h"
#include "tests/support/files.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace sbd {
namespace {

using sbd::testing::PgInstance;
using sbd::testing::PgSandbox;
using sbd::testing::ReadFile;
using sbd::testing::WaitFor;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kFenceRole = "splitbrain_fence";
constexpr const char* kRolePassword = "x";

struct ConnCloser {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using Conn = std::unique_ptr<PGconn, ConnCloser>;

// A blocking connection (the test's own sessions). Fails the test when it cannot log in.
Conn Open(const std::string& dsn) {
  Conn conn(PQconnectdb((dsn + " connect_timeout=10").c_str()));
  INFO("connecting: " << PQerrorMessage(conn.get()));
  REQUIRE(PQstatus(conn.get()) == CONNECTION_OK);
  return conn;
}

std::string AppDsn(const PgInstance& pg, const std::string& user, const std::string& app = "") {
  std::string dsn = "host=127.0.0.1 port=" + std::to_string(pg.port()) +
                    " dbname=postgres user=" + user + " password=" + kRolePassword;
  return app.empty() ? dsn : dsn + " application_name=" + app;
}

std::string ProbeDsn(const PgInstance& pg) {
  return pg.MonitorDsn() + " password=" + PgSandbox::kMonitorPassword +
         " application_name=splitbrain-detector";
}

// Runs `sql`; "" on success, else the SQLSTATE ("?" when there is none: a broken connection).
std::string SqlState(PGconn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  const ExecStatusType st = PQresultStatus(r);
  std::string out;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    out = state != nullptr ? state : "?";
  }
  PQclear(r);
  return out;
}

std::string Scalar(PGconn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  INFO(sql << ": " << PQresultErrorMessage(r));
  const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
  std::string out = ok ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  REQUIRE(ok);
  return out;
}

FenceTarget TargetFor(const PgInstance& pg, const std::string& user,
                      const std::string& password = kRolePassword) {
  FenceTarget t;
  t.dsn = pg.MonitorDsn();  // user=splitbrain: the fence replaces it
  t.user = user;
  t.password = password;
  t.spare_user = PgSandbox::kMonitorUser;
  return t;
}

// The fencing role with exactly the three grants, and a non-superuser application role.
void CreateRoles(PgInstance& primary) {
  primary.Query(std::string("CREATE ROLE ") + kFenceRole + " LOGIN PASSWORD 'x';" +
                "GRANT ALTER SYSTEM ON PARAMETER default_transaction_read_only TO " + kFenceRole +
                "; GRANT EXECUTE ON FUNCTION pg_reload_conf() TO " + kFenceRole +
                "; GRANT pg_signal_backend TO " + kFenceRole + ";");
  primary.Query(
      "CREATE ROLE app LOGIN PASSWORD 'x'; CREATE TABLE app_data (v int);"
      "GRANT SELECT, INSERT ON app_data TO app;");
}

std::string AutoConf(const PgInstance& pg) {
  return ReadFile(pg.data_dir() + "/postgresql.auto.conf");
}

// A TCP listener on 127.0.0.1 that accepts connections and never writes a byte.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~SilentListener() {
    stop_ = true;
    thread_.join();
    for (int fd : accepted_) ::close(fd);
    ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_count_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept(fd_, nullptr, nullptr);
      if (fd >= 0) {
        accepted_.push_back(fd);  // held open, never written to
        ++accepted_count_;
      }
    }
  }
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_count_{0};
  std::vector<int> accepted_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("fence: a primary refuses writes, its app sessions end, the probe and replica stay",
          "[fence]") {
  PgSandbox sandbox;
  PgInstance& primary = sandbox.StartPrimary("fence-primary");
  PgInstance& replica = sandbox.StartReplica("fence-replica", primary);
  CreateRoles(primary);
  const std::string walsender = primary.Query(
      "SELECT pid FROM pg_stat_replication WHERE application_name = 'fence-replica' AND state = "
      "'streaming'");
  REQUIRE_FALSE(walsender.empty());

  Conn app = Open(AppDsn(primary, "app", "billing"));
  REQUIRE(SqlState(app.get(), "BEGIN") == "");
  REQUIRE(SqlState(app.get(), "INSERT INTO app_data VALUES (1)") == "");  // open read-write txn
  Conn probe = Open(ProbeDsn(primary));
  REQUIRE(Scalar(probe.get(), "SHOW transaction_read_only") == "off");
  // A superuser's idle session: a non-superuser role may not end it (an attempt would be an
  // ERROR for the whole statement); it is counted and left, read-only after the reload.
  Conn admin = Open(primary.SuperuserDsn() + " application_name=admin");

  const FenceOutcome out = FencePostgres(TargetFor(primary, kFenceRole));
  INFO("detail: " << out.detail);
  CHECK(out.result == "fenced");
  CHECK(out.verified);
  CHECK(out.sessions_ended >= 1);
  CHECK(out.detail.find("left 1 superuser session(s)") != std::string::npos);  // not the walsender

  // The application session is gone and its open transaction with it.
  CHECK(SqlState(app.get(), "INSERT INTO app_data VALUES (2)") != "");
  CHECK(PQstatus(app.get()) == CONNECTION_BAD);
  CHECK(primary.Query("SELECT count(*) FROM app_data") == "0");
  // The probe's session survives, now read-only.
  CHECK(Scalar(probe.get(), "SHOW transaction_read_only") == "on");
  CHECK(Scalar(admin.get(), "SHOW transaction_read_only") == "on");
  // New sessions cannot write, superuser or not.
  Conn su = Open(primary.SuperuserDsn());
  CHECK(SqlState(su.get(), "CREATE TABLE after_fence ()") == "25006");
  Conn app2 = Open(AppDsn(primary, "app"));
  CHECK(SqlState(app2.get(), "INSERT INTO app_data VALUES (3)") == "25006");
  // The walsender was not killed: the same one still streams to the replica.
  CHECK(primary.Query("SELECT pid FROM pg_stat_replication WHERE application_name = "
                      "'fence-replica' AND state = 'streaming'") == walsender);
  CHECK(replica.Query("SELECT status FROM pg_stat_wal_receiver") == "streaming");

  // The undo, one statement at a time, as a superuser: writes work again on new connections.
  const std::string undo = PostgresFenceUndo();
  CHECK(undo == "ALTER SYSTEM RESET default_transaction_read_only; SELECT pg_reload_conf();");
  const size_t split = undo.find(';');
  primary.Query(undo.substr(0, split + 1));
  primary.Query(undo.substr(split + 1));
  std::string state = "not tried";
  CHECK(WaitFor(
      [&] {
        Conn c = Open(AppDsn(primary, "app"));
        state = SqlState(c.get(), "INSERT INTO app_data VALUES (4)");
        return state.empty();
      },
      milliseconds(5000)));
  INFO("last SQLSTATE: " << state);
  CHECK(primary.Query("SELECT count(*) FROM app_data") == "1");
  CHECK(AutoConf(primary).find("default_transaction_read_only") == std::string::npos);
}

TEST_CASE("fence: a replica in recovery is not_primary and nothing changes", "[fence]") {
  PgSandbox sandbox;
  PgInstance& primary = sandbox.StartPrimary("fence-primary");
  PgInstance& replica = sandbox.StartReplica("fence-replica", primary);
  CreateRoles(primary);
  REQUIRE(WaitFor(
      [&] { return replica.Query("SELECT count(*) FROM pg_roles WHERE rolname = 'app'") == "1"; },
      milliseconds(10000)));
  const std::string conf_before = AutoConf(replica);
  Conn app = Open(AppDsn(replica, "app", "reporting"));
  REQUIRE(SqlState(app.get(), "BEGIN") == "");
  REQUIRE(SqlState(app.get(), "SELECT count(*) FROM app_data") == "");

  const FenceOutcome out = FencePostgres(TargetFor(replica, kFenceRole));
  INFO("detail: " << out.detail);
  CHECK(out.result == "not_primary");
  CHECK_FALSE(out.verified);
  CHECK(out.sessions_ended == 0);

  CHECK(SqlState(app.get(), "SELECT count(*) FROM app_data") == "");  // the session survived
  CHECK(SqlState(app.get(), "COMMIT") == "");
  Conn fresh = Open(AppDsn(replica, "app"));
  CHECK(Scalar(fresh.get(), "SHOW default_transaction_read_only") == "off");
  CHECK(AutoConf(replica) == conf_before);
  CHECK(AutoConf(replica).find("default_transaction_read_only") == std::string::npos);
}

TEST_CASE("fence: a role without the grants fails at ALTER SYSTEM and changes nothing", "[fence]") {
  PgSandbox sandbox;
  PgInstance& primary = sandbox.StartPrimary("fence-primary");
  CreateRoles(primary);
  primary.Query("CREATE ROLE splitbrain_nogrant LOGIN PASSWORD 'x'");
  const std::string conf_before = AutoConf(primary);
  Conn app = Open(AppDsn(primary, "app", "billing"));
  REQUIRE(SqlState(app.get(), "BEGIN") == "");
  REQUIRE(SqlState(app.get(), "INSERT INTO app_data VALUES (1)") == "");

  const FenceOutcome out = FencePostgres(TargetFor(primary, "splitbrain_nogrant"));
  INFO("detail: " << out.detail);
  CHECK(out.result == "failed");
  CHECK_FALSE(out.verified);
  CHECK(out.sessions_ended == 0);
  CHECK(out.detail.find("ALTER SYSTEM") != std::string::npos);
  CHECK(out.detail.find("permission denied") != std::string::npos);

  // Nothing half-done: the file untouched, new sessions writable, the open transaction commits.
  CHECK(AutoConf(primary) == conf_before);
  Conn fresh = Open(AppDsn(primary, "app"));
  CHECK(Scalar(fresh.get(), "SHOW default_transaction_read_only") == "off");
  CHECK(SqlState(app.get(), "COMMIT") == "");
  CHECK(primary.Query("SELECT count(*) FROM app_data") == "1");
}

TEST_CASE("fence: a role that may ALTER SYSTEM but not reload fails and names the undo",
          "[fence]") {
  PgSandbox sandbox;
  PgInstance& primary = sandbox.StartPrimary("fence-primary");
  primary.Query(
      "CREATE ROLE splitbrain_half LOGIN PASSWORD 'x';"
      "GRANT ALTER SYSTEM ON PARAMETER default_transaction_read_only TO splitbrain_half;");

  const FenceOutcome out = FencePostgres(TargetFor(primary, "splitbrain_half"));
  INFO("detail: " << out.detail);
  CHECK(out.result == "failed");
  CHECK_FALSE(out.verified);
  CHECK(out.detail.find("pg_reload_conf") != std::string::npos);
  CHECK(out.detail.find(PostgresFenceUndo()) != std::string::npos);
  // Observed: the setting is written but not in effect until the next reload.
  CHECK(AutoConf(primary).find("default_transaction_read_only = 'on'") != std::string::npos);
  Conn fresh = Open(primary.SuperuserDsn());
  CHECK(Scalar(fresh.get(), "SHOW default_transaction_read_only") == "off");
}

TEST_CASE("fence: a wrong password fails without the password in the detail", "[fence]") {
  PgSandbox sandbox;
  PgInstance& primary = sandbox.StartPrimary("fence-primary");
  CreateRoles(primary);
  const std::string wrong = "wrong-Secret-4711";

  const FenceOutcome out = FencePostgres(TargetFor(primary, kFenceRole, wrong));
  INFO("detail: " << out.detail);
  CHECK(out.result == "failed");
  CHECK_FALSE(out.verified);
  CHECK(out.detail.find("password authentication failed") != std::string::npos);
  CHECK(out.detail.find(wrong) == std::string::npos);
  Conn fresh = Open(primary.SuperuserDsn());
  CHECK(Scalar(fresh.get(), "SHOW default_transaction_read_only") == "off");
}

TEST_CASE("fence: a listener that accepts and never answers fails within the bound", "[fence]") {
  SilentListener listener;
  FenceTarget t;
  t.dsn = "host=127.0.0.1 port=" + std::to_string(listener.port()) + " dbname=postgres";
  t.user = kFenceRole;
  t.password = "never-sent-secret";
  t.spare_user = PgSandbox::kMonitorUser;
  t.timeout = milliseconds(500);

  const auto start = std::chrono::steady_clock::now();
  const FenceOutcome out = FencePostgres(t);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  INFO("detail: " << out.detail);
  CHECK(out.result == "failed");
  CHECK(out.detail.find("timed out") != std::string::npos);
  CHECK(out.detail.find("never-sent-secret") == std::string::npos);
  CHECK(listener.accepted() >= 1);  // it did reach the listener
  CHECK(elapsed >= milliseconds(450));
  CHECK(elapsed < seconds(3));
}

TEST_CASE("fence: a SIGSTOPped server fails within the bound and is intact after", "[fence]") {
  PgSandbox sandbox;
  PgInstance& primary = sandbox.StartPrimary("fence-primary");
  CreateRoles(primary);
  FenceTarget t = TargetFor(primary, kFenceRole);
  t.timeout = milliseconds(500);

  primary.Freeze();
  const auto start = std::chrono::steady_clock::now();
  const FenceOutcome out = FencePostgres(t);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  primary.Thaw();
  INFO("detail: " << out.detail);
  CHECK(out.result == "failed");
  CHECK(out.detail.find("timed out") != std::string::npos);
  CHECK(elapsed < seconds(3));
  Conn fresh = Open(primary.SuperuserDsn());
  CHECK(Scalar(fresh.get(), "SHOW default_transaction_read_only") == "off");
}

}  // namespace sbd
