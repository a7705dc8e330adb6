// The PostgreSQL fence of the opt-in remediation: makes a confirmed zombie primary refuse
// writes (default_transaction_read_only through ALTER SYSTEM), ends its client sessions, and
// checks from a new connection that a write is refused. Non-blocking libpq under a deadline.
#pragma once
#include <chrono>
#include <optional>
#include <string>

namespace sbd {

/// Where and as whom a fence connects. Plain value type.
struct FenceTarget {
  std::string dsn;                      ///< the member's libpq DSN, without any password
  std::string user;                     ///< the fencing role (replaces the DSN's user)
  std::optional<std::string> password;  ///< its password, already resolved; never logged
  /// The probe's own role: its sessions named application_name=splitbrain-detector are kept.
  std::string spare_user;
  /// Bounds each step (connect, each statement, the check); the whole fence takes at most
  /// a few times this, whatever the server does (hung, black-holed, trickling).
  std::chrono::milliseconds timeout{3000};
};

/// What one fence did. Plain value type.
struct FenceOutcome {
  std::string result;      ///< "fenced" (the check saw writes refused), "failed", or "not_primary"
  std::string detail;      ///< one line for humans (never a secret): what was done or what failed
  int sessions_ended = 0;  ///< client backends terminated
  bool verified = false;   ///< a write from a new connection was refused with SQLSTATE 25006
  std::string undo;        ///< what undoes it, when something was changed; empty otherwise
};

/// Fences one PostgreSQL member. Blocking (call it off the event loop); never throws.
/// 1. connects as target.user (application_name=splitbrain-detector-fence) and reads
///    pg_is_in_recovery(): in recovery already -> "not_primary", nothing changed;
/// 2. ALTER SYSTEM SET default_transaction_read_only = on; SELECT pg_reload_conf();
/// 3. terminates every client backend except its own and the probe's (spare_user with
///    application_name splitbrain-detector); never a walsender or any non-client backend;
/// 4. checks from a NEW connection, retrying within the timeout while the reload spreads:
///    BEGIN; CREATE TABLE splitbrain_fence_check (); must fail with SQLSTATE 25006
///    (then ROLLBACK). "fenced" only when it did.
///
/// Every step runs under its own deadline of target.timeout: six steps, so at most about six
/// times the timeout in all (one, when the server does not answer the connect). The DSN's host
/// should be an address (or hostaddr given): libpq resolves a host name synchronously.
///
/// The fencing role needs no superuser: GRANT ALTER SYSTEM ON PARAMETER
/// default_transaction_read_only, EXECUTE ON FUNCTION pg_reload_conf() and pg_signal_backend.
/// Such a role cannot end a superuser's session: those are left (their next transaction is
/// read-only once they read the reload) and counted in the detail. Without pg_read_all_stats
/// it cannot read other roles' backend_type; a backend is then taken as a client when it has
/// a database and a role and is not a walsender (pg_stat_get_wal_senders()).
///
/// Failures, by step: 1 or 2 -> nothing changed; the reload refused -> the setting is in
/// postgresql.auto.conf, in effect at the next reload (the detail says so, with the undo);
/// the sessions not ended or the check not refused -> the server is fenced for new
/// transactions at least, and the result is "failed".
FenceOutcome FencePostgres(const FenceTarget& target);

/// The SQL that undoes a fence, for the runbook and the page:
/// "ALTER SYSTEM RESET default_transaction_read_only; SELECT pg_reload_conf();"
/// Two statements, to be run one at a time (psql reading a file or its prompt does; a single
/// multi-statement query, as psql -c sends, is refused: ALTER SYSTEM cannot run inside its
/// implicit transaction block). As a superuser, or the fencing role.
const char* PostgresFenceUndo();

}  // namespace sbd
