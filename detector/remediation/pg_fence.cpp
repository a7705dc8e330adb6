// The PostgreSQL fence (pg_fence.h): non-blocking libpq, every step under a deadline kept by
// poll() on the connection's socket, so a hung, stopped or black-holed server costs at most
// the timeout per step.
#include "detector/remediation/pg_fence.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

namespace sbd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kFenceApplicationName = "splitbrain-detector-fence";
constexpr const char* kUndo =
    "ALTER SYSTEM RESET default_transaction_read_only; SELECT pg_reload_conf();";
constexpr milliseconds kCheckRetryPause{50};

// Ends every client backend but this one and the probe's ($1 with the probe's application
// name). A backend whose type the role may not read (another role's, without
// pg_read_all_stats) is a client when it has a database and a role and is not a walsender.
// Superusers' sessions are counted, not signalled, by a role that is not one (it may not).
constexpr const char* kTerminateSql =
    "SELECT count(*) FILTER (WHERE s.skipped),"
    " count(*) FILTER (WHERE CASE WHEN s.skipped THEN false"
    " ELSE pg_terminate_backend(s.pid) END)"
    " FROM (SELECT a.pid, r.rolsuper AND NOT me.rolsuper AS skipped"
    " FROM pg_stat_activity a JOIN pg_roles r ON r.oid = a.usesysid"
    " CROSS JOIN (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) me"
    " WHERE a.pid <> pg_backend_pid()"
    " AND COALESCE(a.backend_type = 'client backend', a.datid IS NOT NULL"
    " AND a.pid NOT IN (SELECT w.pid FROM pg_stat_get_wal_senders() w WHERE w.pid IS NOT NULL))"
    " AND NOT (COALESCE(a.usename = $1 AND a.application_name = 'splitbrain-detector', false))"
    ") s";

struct ConnCloser {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using Conn = std::unique_ptr<PGconn, ConnCloser>;
struct ResultCloser {
  void operator()(PGresult* result) const { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultCloser>;

// What one statement answered.
struct Reply {
  bool ok = false;
  std::string error;             // one line: the server's message, or what failed on the wire
  std::string sqlstate;          // the server error's SQLSTATE, "" otherwise
  std::vector<std::string> row;  // the first row of the last result with rows
};

// libpq's messages on one line (they never hold the conninfo, so never the password).
std::string OneLine(const char* message) {
  std::string out;
  for (const char* p = message ? message : ""; *p != '\0'; ++p) {
    const bool space = *p == '\n' || *p == '\r' || *p == '\t' || *p == ' ';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : *p;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? "no message" : out;
}

void IgnoreNotice(void*, const char*) {}  // a WARNING from the server is no output of ours

// Waits until the connection's socket is readable (or writable). False at the deadline.
bool WaitSocket(PGconn* conn, bool for_write, Clock::time_point deadline, std::string* error) {
  const int fd = PQsocket(conn);
  if (fd < 0) {
    *error = "no socket: " + OneLine(PQerrorMessage(conn));
    return false;
  }
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      *error = "timed out";
      return false;
    }
    pollfd p{fd, static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, INT_MAX)));
    if (n > 0) return true;  // POLLERR and POLLHUP too: libpq then says what happened
    if (n < 0 && errno != EINTR) {
      *error = std::string("poll: ") + std::strerror(errno);
      return false;
    }
  }
}

// Connects as target.user with the DSN's other options, by the deadline. Null on failure.
Conn Connect(const FenceTarget& target, Clock::time_point deadline, std::string* error) {
  char* parse_error = nullptr;
  PQconninfoOption* options = PQconninfoParse(target.dsn.c_str(), &parse_error);
  if (options == nullptr) {
    PQfreemem(parse_error);  // not shown: it may quote the DSN
    *error = "the member's DSN does not parse";
    return nullptr;
  }
  std::vector<const char*> keys;
  std::vector<const char*> values;
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    const std::string key = o->keyword;
    if (o->val == nullptr || key == "user" || key == "password" || key == "application_name" ||
        key == "fallback_application_name") {
      continue;
    }
    keys.push_back(o->keyword);
    values.push_back(o->val);
  }
  keys.push_back("user");
  values.push_back(target.user.c_str());
  if (target.password) {
    keys.push_back("password");
    values.push_back(target.password->c_str());
  }
  keys.push_back("application_name");
  values.push_back(kFenceApplicationName);
  keys.push_back(nullptr);
  values.push_back(nullptr);
  Conn conn(PQconnectStartParams(keys.data(), values.data(), /*expand_dbname=*/0));
  PQconninfoFree(options);  // libpq copied what it needs
  if (!conn || PQstatus(conn.get()) == CONNECTION_BAD) {
    *error = conn ? OneLine(PQerrorMessage(conn.get())) : "out of memory";
    return nullptr;
  }
  PQsetNoticeProcessor(conn.get(), IgnoreNotice, nullptr);
  for (PostgresPollingStatusType st = PGRES_POLLING_WRITING; st != PGRES_POLLING_OK;
       st = PQconnectPoll(conn.get())) {
    if (st == PGRES_POLLING_FAILED) {
      *error = OneLine(PQerrorMessage(conn.get()));
      return nullptr;
    }
    if (!WaitSocket(conn.get(), st == PGRES_POLLING_WRITING, deadline, error)) return nullptr;
  }
  if (PQsetnonblocking(conn.get(), 1) != 0) {
    *error = "cannot make the connection non-blocking: " + OneLine(PQerrorMessage(conn.get()));
    return nullptr;
  }
  return conn;
}

// Takes one result's rows or error into `reply` (the first error wins).
void Take(const PGresult* result, Reply* reply) {
  const ExecStatusType status = PQresultStatus(result);
  if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
    if (PQntuples(result) == 0) return;
    reply->row.clear();
    for (int i = 0; i < PQnfields(result); ++i) reply->row.emplace_back(PQgetvalue(result, 0, i));
    return;
  }
  if (!reply->error.empty()) return;
  const char* primary = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
  const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  reply->error = OneLine(primary != nullptr ? primary : PQresultErrorMessage(result));
  reply->sqlstate = state != nullptr ? state : "";
}

// Runs one statement (with text parameters) by the deadline.
Reply Exec(PGconn* conn, const char* sql, const std::vector<const char*>& params,
           Clock::time_point deadline) {
  Reply reply;
  const int sent = params.empty() ? PQsendQuery(conn, sql)
                                  : PQsendQueryParams(conn, sql, static_cast<int>(params.size()),
                                                      nullptr, params.data(), nullptr, nullptr, 0);
  if (sent == 0) {
    reply.error = OneLine(PQerrorMessage(conn));
    return reply;
  }
  int flushed;
  while ((flushed = PQflush(conn)) == 1) {
    if (!WaitSocket(conn, /*for_write=*/true, deadline, &reply.error)) return reply;
  }
  if (flushed < 0) {
    reply.error = OneLine(PQerrorMessage(conn));
    return reply;
  }
  for (;;) {
    while (PQisBusy(conn)) {
      if (!WaitSocket(conn, /*for_write=*/false, deadline, &reply.error)) return reply;
      if (PQconsumeInput(conn) == 0) break;  // PQgetResult then reports the broken connection
    }
    Result result(PQgetResult(conn));
    if (!result) break;
    Take(result.get(), &reply);
  }
  reply.ok = reply.error.empty();
  return reply;
}

// Step 4: a NEW connection's write must be refused with 25006; retried by the deadline while
// the reload reaches the postmaster. A table created before it does is rolled back (or dropped
// with the connection, its transaction never committed).
bool CheckRefusesWrites(const FenceTarget& target, std::string* detail) {
  const Clock::time_point deadline = Clock::now() + target.timeout;
  for (int attempt = 1;; ++attempt) {
    std::string error;
    if (Conn conn = Connect(target, deadline, &error)) {
      Reply begin = Exec(conn.get(), "BEGIN", {}, deadline);
      Reply create = begin.ok
                         ? Exec(conn.get(), "CREATE TABLE splitbrain_fence_check ()", {}, deadline)
                         : begin;
      if (begin.ok) Exec(conn.get(), "ROLLBACK", {}, deadline);
      if (create.sqlstate == "25006") {
        *detail =
            "a new connection's write was refused (25006, attempt " + std::to_string(attempt) + ")";
        return true;
      }
      error = create.ok ? "a new connection could still write" : create.error;
    } else {
      error = "connect: " + error;
    }
    if (Clock::now() + kCheckRetryPause >= deadline) {
      *detail = "not verified after " + std::to_string(attempt) + " attempt(s): " + error;
      return false;
    }
    std::this_thread::sleep_for(kCheckRetryPause);
  }
}

// Steps 2 and 3 on the fencing connection; false (with outcome->detail) when one failed.
bool SetReadOnlyAndEndSessions(PGconn* conn, const FenceTarget& target, FenceOutcome* outcome,
                               int* skipped) {
  Reply alter = Exec(conn, "ALTER SYSTEM SET default_transaction_read_only = on", {},
                     Clock::now() + target.timeout);
  if (!alter.ok) {
    outcome->detail =
        "ALTER SYSTEM SET default_transaction_read_only refused (nothing changed "
        "unless it timed out): " +
        alter.error;
    return false;
  }
  outcome->undo = kUndo;  // from here on the setting is in postgresql.auto.conf
  Reply reload = Exec(conn, "SELECT pg_reload_conf()", {}, Clock::now() + target.timeout);
  if (!reload.ok || reload.row.empty() || reload.row[0] != "t") {
    outcome->detail = "pg_reload_conf() failed (" + (reload.ok ? "it said false" : reload.error) +
                      "): default_transaction_read_only=on is in postgresql.auto.conf, in effect "
                      "at the next reload; undo: " +
                      kUndo;
    return false;
  }
  Reply ended =
      Exec(conn, kTerminateSql, {target.spare_user.c_str()}, Clock::now() + target.timeout);
  if (!ended.ok || ended.row.size() != 2) {
    outcome->detail = "read-only set and reloaded, but ending the client sessions failed: " +
                      (ended.ok ? std::string("no counts") : ended.error);
    return false;
  }
  *skipped = std::atoi(ended.row[0].c_str());
  outcome->sessions_ended = std::atoi(ended.row[1].c_str());
  return true;
}

FenceOutcome Fence(const FenceTarget& target) {
  FenceOutcome outcome;
  outcome.result = "failed";
  std::string error;
  Conn conn = Connect(target, Clock::now() + target.timeout, &error);
  if (!conn) {
    outcome.detail = "connecting as " + target.user + " failed: " + error;
    return outcome;
  }
  Reply recovery =
      Exec(conn.get(), "SELECT pg_is_in_recovery()", {}, Clock::now() + target.timeout);
  if (!recovery.ok || recovery.row.empty()) {
    outcome.detail = "reading pg_is_in_recovery() failed: " +
                     (recovery.ok ? std::string("no row") : recovery.error);
    return outcome;
  }
  if (recovery.row[0] == "t") {
    outcome.result = "not_primary";
    outcome.detail = "in recovery (a standby): nothing changed";
    return outcome;
  }
  int skipped = 0;
  const bool done = SetReadOnlyAndEndSessions(conn.get(), target, &outcome, &skipped);
  conn.reset();
  if (!done) return outcome;
  std::string check;
  outcome.verified = CheckRefusesWrites(target, &check);
  outcome.result = outcome.verified ? "fenced" : "failed";
  outcome.detail = "default_transaction_read_only=on (ALTER SYSTEM, reloaded); ended " +
                   std::to_string(outcome.sessions_ended) + " client session(s)";
  if (skipped > 0) {
    outcome.detail += ", left " + std::to_string(skipped) + " superuser session(s) it may not end";
  }
  outcome.detail += "; " + check;
  return outcome;
}

}  // namespace

FenceOutcome FencePostgres(const FenceTarget& target) {
  try {
    return Fence(target);
  } catch (...) {  // std::bad_alloc, in practice: the strings below fit in place
    FenceOutcome outcome;
    outcome.result = "failed";
    outcome.detail = "internal error";
    return outcome;
  }
}

const char* PostgresFenceUndo() { return kUndo; }

}  // namespace sbd
