#include "probes/postgres.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <pqxx/pqxx>
#include <sstream>

#include "probes/deadline_watchdog.h"

namespace sbd {
namespace {

std::string Trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

bool Contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

ProbeFailureReason ClassifyConnectError(const std::string& message) {
  if (Contains(message, "timeout expired")) return ProbeFailureReason::kTimeout;
  if (Contains(message, "Connection refused") || Contains(message, "No such file or directory")) {
    return ProbeFailureReason::kRefused;
  }
  if (Contains(message, "authentication failed") || Contains(message, "no password supplied") ||
      Contains(message, "no pg_hba.conf entry") || Contains(message, "permission denied") ||
      Contains(message, "does not exist")) {
    return ProbeFailureReason::kAuth;
  }
  if (Contains(message, "could not translate host name") || Contains(message, "No route to host") ||
      Contains(message, "Network is unreachable")) {
    return ProbeFailureReason::kUnreachable;
  }
  if (Contains(message, "starting up") || Contains(message, "shutting down") ||
      Contains(message, "in recovery mode")) {
    return ProbeFailureReason::kStarting;
  }
  if (Contains(message, "server closed the connection") || Contains(message, "terminating")) {
    return ProbeFailureReason::kConnectionLost;
  }
  return ProbeFailureReason::kInternal;
}

ProbeFailureReason ClassifySqlState(const std::string& sqlstate) {
  if (sqlstate == "57014") return ProbeFailureReason::kTimeout;  // statement_timeout
  if (sqlstate.rfind("28", 0) == 0 || sqlstate == "42501") return ProbeFailureReason::kAuth;
  // cannot_connect_now, admin_shutdown, crash_shutdown: the server itself is going down or
  // coming up, so it accepts no writes (unlike a connection cut somewhere on the network).
  if (sqlstate == "57P03" || sqlstate == "57P01" || sqlstate == "57P02") {
    return ProbeFailureReason::kStarting;
  }
  if (sqlstate.rfind("08", 0) == 0 || sqlstate.rfind("57P", 0) == 0) {
    return ProbeFailureReason::kConnectionLost;
  }
  return ProbeFailureReason::kQuery;
}

namespace {

// The WAL receiver columns starting at `first`: none when no receiver runs, hidden when
// only its presence is visible to us.
std::optional<WalReceiverReading> ReadWalReceiver(const pqxx::row& row,
                                                  pqxx::row::size_type first) {
  if (!row[first].as<bool>(false)) return std::nullopt;
  WalReceiverReading upstream;
  if (row[first + 1].is_null()) {
    upstream.hidden = true;
    return upstream;
  }
  upstream.status = row[first + 1].as<std::string>("");
  upstream.sender_host = row[first + 2].as<std::string>("");
  upstream.sender_port = row[first + 3].as<int>(0);
  upstream.received_tli = row[first + 4].as<std::int64_t>(0);
  upstream.flushed_lsn = row[first + 5].as<std::string>("");
  upstream.latest_end_time = row[first + 6].as<std::string>("");
  return upstream;
}

// "%X/%X" as PostgreSQL prints an LSN: two runs of 1-8 hex digits around a slash.
bool ParseLsn(const std::string& text, std::uint64_t* out) {
  const auto slash = text.find('/');
  if (slash == std::string::npos) return false;
  auto hex = [](const std::string& part, std::uint64_t* value) {
    if (part.empty() || part.size() > 8) return false;
    *value = 0;
    for (char ch : part) {
      const int digit = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0'
                        : (ch >= 'A' && ch <= 'F')                   ? ch - 'A' + 10
                        : (ch >= 'a' && ch <= 'f')                   ? ch - 'a' + 10
                                                                     : -1;
      if (digit < 0) return false;
      *value = *value * 16 + static_cast<std::uint64_t>(digit);
    }
    return true;
  };
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  if (!hex(text.substr(0, slash), &high) || !hex(text.substr(slash + 1), &low)) return false;
  *out = (high << 32) | low;
  return true;
}

bool IsBlank(char ch) { return ch == ' ' || ch == '\t'; }

// The next run of non-blank characters from `pos`, skipping blanks before it.
std::string NextField(const std::string& line, size_t* pos) {
  while (*pos < line.size() && IsBlank(line[*pos])) ++*pos;
  const size_t start = *pos;
  while (*pos < line.size() && !IsBlank(line[*pos])) ++*pos;
  return line.substr(start, *pos - start);
}

// One history line: "parentTLI<blank>LSN[<blank>reason]", or what is wrong with it.
std::variant<TimelineSwitch, std::string> ParseHistoryLine(const std::string& line) {
  size_t pos = 0;
  const std::string parent = NextField(line, &pos);
  const std::string lsn = NextField(line, &pos);
  if (parent.empty() || parent.size() > 10 ||
      !std::all_of(parent.begin(), parent.end(),
                   [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
    return std::string("the parent timeline is not a number");
  }
  TimelineSwitch entry;
  entry.parent_timeline = std::stoll(parent);
  if (entry.parent_timeline < 1 || entry.parent_timeline > 0xFFFFFFFFLL) {
    return std::string("the parent timeline is out of range");
  }
  if (!ParseLsn(lsn, &entry.switch_lsn)) return std::string("the switch point is not an LSN");
  entry.switch_lsn_text = lsn;
  if (pos < line.size() && !IsBlank(line[pos])) return std::string("no blank after the LSN");
  return entry;
}

}  // namespace

std::variant<std::vector<TimelineSwitch>, std::string> ParseTimelineHistory(const std::string& text,
                                                                            std::int64_t timeline) {
  if (text.size() > kMaxTimelineHistoryBytes) {
    return "the history file is larger than " + std::to_string(kMaxTimelineHistoryBytes) + " bytes";
  }
  std::vector<TimelineSwitch> switches;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = 0;
    while (first < line.size() && IsBlank(line[first])) ++first;
    if (first == line.size() || line[first] == '#') continue;
    auto parsed = ParseHistoryLine(line);
    const std::string where = "history line " + std::to_string(number) + ": ";
    if (auto* error = std::get_if<std::string>(&parsed)) return where + *error;
    auto& entry = std::get<TimelineSwitch>(parsed);
    if (entry.parent_timeline >= timeline) {
      return where + "parent timeline " + std::to_string(entry.parent_timeline) +
             " is not below timeline " + std::to_string(timeline);
    }
    if (!switches.empty() && (entry.parent_timeline <= switches.back().parent_timeline ||
                              entry.switch_lsn < switches.back().switch_lsn)) {
      return where + "timelines or switch points go back";
    }
    switches.push_back(std::move(entry));
  }
  if (switches.empty()) return std::string("the history file names no parent timeline");
  return switches;
}

PostgresProbe::PostgresProbe(MemberSpec member, Millis timeout)
    : member_(std::move(member)), timeout_(timeout) {}

PostgresProbe::~PostgresProbe() = default;

const char* PostgresProbe::ReadingQuery() {
  // One SELECT, sent alone (no transaction block around it). We report the server's default
  // transaction_read_only, which is what an application's session gets. pg_walfile_name() gives the
  // insert timeline at once, where pg_control_checkpoint() lags until the post-promotion
  // checkpoint.
  return "SELECT r.rec, current_setting('default_transaction_read_only') = 'on', "
         "(SELECT system_identifier FROM pg_control_system())::text, "
         "CASE WHEN r.rec THEN COALESCE((SELECT received_tli FROM pg_stat_wal_receiver), "
         "(SELECT timeline_id FROM pg_control_checkpoint()))::bigint "
         "ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END, "
         "l.lsn::text, COALESCE(pg_wal_lsn_diff(l.lsn, '0/0'), 0)::bigint, "
         "current_setting('server_version_num')::int, "
         "to_char(pg_postmaster_start_time() AT TIME ZONE 'UTC', "
         "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), pg_backend_pid(), "
         // The WAL receiver, if one runs: without pg_read_all_stats only its pid shows.
         "w.pid IS NOT NULL, w.status, w.sender_host, w.sender_port, w.received_tli::bigint, "
         "w.flushed_lsn::text, to_char(w.latest_end_time AT TIME ZONE 'UTC', "
         "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') "
         "FROM (SELECT pg_is_in_recovery() AS rec) r, LATERAL (SELECT CASE WHEN r.rec THEN "
         "COALESCE(pg_last_wal_replay_lsn(), pg_last_wal_receive_lsn()) "
         "ELSE pg_current_wal_lsn() END AS lsn) l "
         "LEFT JOIN pg_stat_wal_receiver w ON true";
}

std::variant<std::string, ProbeFailure> PostgresConninfo(const MemberSpec& member, Millis timeout,
                                                         SteadyClock::time_point deadline) {
  auto password = ResolvePassword(member);
  if (auto* error = std::get_if<std::string>(&password)) {
    return ProbeFailure{ProbeFailureReason::kConfig, *error};
  }
  auto remaining = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now()).count();
  // libpq's connect_timeout is whole seconds with a floor of 2.
  long connect_seconds = std::max<long>(2, static_cast<long>(std::ceil(remaining / 1000.0)));
  long timeout_ms = std::max<long>(100, timeout.count());
  std::string conninfo = member.dsn;
  conninfo += " connect_timeout=" + std::to_string(connect_seconds);
  conninfo += " keepalives=1 keepalives_idle=5 keepalives_interval=1 keepalives_count=3";
  conninfo += " tcp_user_timeout=" + std::to_string(timeout_ms);
  conninfo += " application_name=splitbrain-detector";
  conninfo +=
      " options=" + QuoteConninfoValue("-c statement_timeout=" + std::to_string(timeout_ms) +
                                       " -c lock_timeout=" + std::to_string(timeout_ms) +
                                       " -c idle_in_transaction_session_timeout=60000");
  if (const auto& secret = std::get<std::optional<std::string>>(password)) {
    conninfo += " password=" + QuoteConninfoValue(*secret);
  }
  return conninfo;
}

std::variant<std::string, ProbeFailure> PostgresProbe::ConnectionString(
    SteadyClock::time_point deadline) const {
  return PostgresConninfo(member_, timeout_, deadline);
}

Observation PostgresProbe::Probe(SteadyClock::time_point deadline, StartGate* gate) {
  // Arrive at the gate on every failure path, so the other probes do not wait for us.
  struct Arrival {
    StartGate* gate;
    ~Arrival() {
      if (gate != nullptr) gate->Arrive();
    }
  } arrival{gate};
  Observation obs;
  obs.member = member_.name;
  obs.window.sent_wall = WallClock::now();
  obs.window.sent = SteadyClock::now();
  auto fail = [&](ProbeFailureReason reason, std::string message) {
    obs.window.received = SteadyClock::now();
    obs.result = ProbeFailure{reason, Trim(std::move(message))};
    return obs;
  };
  if (deadline <= obs.window.sent) return fail(ProbeFailureReason::kTimeout, "no time left");

  if (!conn_ || !conn_->is_open()) {
    conn_.reset();
    auto conninfo = ConnectionString(deadline);
    if (auto* failure = std::get_if<ProbeFailure>(&conninfo)) {
      return fail(failure->reason, failure->message);
    }
    try {
      conn_ = std::make_unique<pqxx::connection>(std::get<std::string>(conninfo));
    } catch (const std::exception& e) {
      std::string message = e.what();
      return fail(ClassifyConnectError(message), "connect: " + message);
    }
    if (SteadyClock::now() >= deadline) {
      return fail(ProbeFailureReason::kTimeout, "connected after the deadline");
    }
  }

  if (gate != nullptr) {
    arrival.gate = nullptr;
    gate->ArriveAndWait(deadline);
  }
  // The reading's window starts when the query is sent, not when we began connecting.
  obs.window.sent_wall = WallClock::now();
  obs.window.sent = SteadyClock::now();
  bool drop_connection = false;
  std::visit([&obs](auto&& value) { obs.result = std::move(value); },
             Read(deadline, &drop_connection));
  obs.window.received = SteadyClock::now();
  if (auto* reading = std::get_if<PostgresReading>(&obs.result); reading && !drop_connection) {
    AddTimelineHistory(*reading, deadline, &drop_connection);
  }
  // Only now, with the watchdog disarmed, may the socket be closed.
  if (drop_connection) conn_.reset();
  if (auto* failure = std::get_if<ProbeFailure>(&obs.result)) {
    failure->message = Trim(failure->message);
  }
  return obs;
}

std::variant<PostgresReading, ProbeFailure> PostgresProbe::Read(SteadyClock::time_point deadline,
                                                                bool* drop_connection) {
  auto guard = DeadlineWatchdog::Instance().Arm(conn_->sock(), deadline);
  try {
    // One statement, one round trip: no BEGIN READ ONLY/COMMIT around a plain SELECT.
    pqxx::nontransaction tx(*conn_, "probe");
    pqxx::result rows = tx.exec(ReadingQuery());
    if (rows.size() != 1 || rows[0].size() != 16) {
      *drop_connection = true;
      return ProbeFailure{ProbeFailureReason::kProtocol, "unexpected result shape"};
    }
    const auto& row = rows[0];
    PostgresReading reading;
    reading.in_recovery = row[0].as<bool>();
    reading.read_only = row[1].as<bool>();
    reading.system_identifier = row[2].as<std::string>("");
    reading.timeline = row[3].as<std::int64_t>(0);
    reading.wal_lsn = row[4].as<std::string>("");
    reading.wal_bytes = static_cast<std::uint64_t>(row[5].as<std::int64_t>(0));
    reading.server_version = row[6].as<int>(0);
    reading.postmaster_start = row[7].as<std::string>("");
    reading.backend_pid = row[8].as<int>(0);
    reading.upstream = ReadWalReceiver(row, 9);
    if (reading.system_identifier.empty()) {
      return ProbeFailure{ProbeFailureReason::kProtocol, "no system identifier in the reading"};
    }
    return reading;
  } catch (const pqxx::sql_error& e) {
    auto reason = guard.fired() ? ProbeFailureReason::kTimeout : ClassifySqlState(e.sqlstate());
    *drop_connection = reason != ProbeFailureReason::kQuery || !conn_->is_open();
    return ProbeFailure{reason, e.what()};
  } catch (const pqxx::conversion_error& e) {
    // A value that is not what the query yields from a real server (a null, an unparsable
    // number): something else answers on this port. Start afresh next time.
    *drop_connection = true;
    return ProbeFailure{ProbeFailureReason::kProtocol,
                        std::string("unexpected value: ") + e.what()};
  } catch (const std::exception& e) {
    // broken_connection, in_doubt_error, conversion errors: start afresh next time.
    *drop_connection = true;
    if (guard.fired()) {
      return ProbeFailure{ProbeFailureReason::kTimeout, "no answer before the deadline"};
    }
    return ProbeFailure{ProbeFailureReason::kConnectionLost, e.what()};
  }
}

void PostgresProbe::AddTimelineHistory(PostgresReading& reading, SteadyClock::time_point deadline,
                                       bool* drop_connection) {
  if (!reading.writable() || reading.timeline <= 1) return;
  constexpr auto kRetryAfterFailure = std::chrono::seconds(60);
  const auto key = std::make_pair(reading.system_identifier, reading.timeline);
  auto it = histories_.find(key);
  const auto now = SteadyClock::now();
  if (it == histories_.end() ||
      (it->second.switches.empty() && now - it->second.failed_at >= kRetryAfterFailure)) {
    if (now >= deadline) {
      reading.timeline_history_error = "not read yet: no time left in this probe";
      return;
    }
    if (histories_.size() >= 8) histories_.clear();
    auto read = ReadTimelineHistory(reading.timeline, deadline, drop_connection);
    HistoryEntry entry;
    if (auto* switches = std::get_if<std::vector<TimelineSwitch>>(&read)) {
      entry.switches = std::move(*switches);
    } else {
      entry.error = std::get<std::string>(read);
      entry.failed_at = now;
    }
    it = histories_.insert_or_assign(key, std::move(entry)).first;
  }
  reading.timeline_history = it->second.switches;
  reading.timeline_history_error = it->second.error;
}

std::string TimelineHistoryFile(std::int64_t timeline) {
  char file[64];
  std::snprintf(file, sizeof file, "pg_wal/%08llX.history", static_cast<long long>(timeline));
  return file;
}

std::string TimelineHistoryQuery(std::int64_t timeline) {
  // Inside the data directory, so EXECUTE on pg_read_file(text) is all the role needs; at most
  // one character past the limit comes back, so that a longer file is refused, not truncated.
  return "SELECT left(pg_read_file('" + TimelineHistoryFile(timeline) + "'), " +
         std::to_string(kMaxTimelineHistoryBytes + 1) + ")";
}

std::variant<std::vector<TimelineSwitch>, std::string> PostgresProbe::ReadTimelineHistory(
    std::int64_t timeline, SteadyClock::time_point deadline, bool* drop_connection) {
  if (timeline > 0xFFFFFFFFLL) return std::string("timeline out of range");
  const std::string file = TimelineHistoryFile(timeline);
  const std::string sql = TimelineHistoryQuery(timeline);
  auto guard = DeadlineWatchdog::Instance().Arm(conn_->sock(), deadline);
  try {
    pqxx::nontransaction tx(*conn_, "timeline_history");
    pqxx::result rows = tx.exec(sql);
    if (rows.size() != 1 || rows[0].size() != 1 || rows[0][0].is_null()) {
      return file + ": unexpected result shape";
    }
    auto parsed = ParseTimelineHistory(rows[0][0].as<std::string>(), timeline);
    if (auto* error = std::get_if<std::string>(&parsed)) return file + ": " + *error;
    return parsed;
  } catch (const pqxx::sql_error& e) {
    *drop_connection = guard.fired() || !conn_->is_open();
    if (guard.fired()) return std::string("no answer before the deadline");
    // Against PostgreSQL 15 the sqlstate check alone missed it; the server's text says it too.
    if (e.sqlstate() == "42501" || Contains(e.what(), "permission denied for function")) {
      return std::string(
          "permission denied for function pg_read_file; grant EXECUTE ON FUNCTION "
          "pg_read_file(text) to the detector's role");
    }
    return file + ": " + Trim(e.what());
  } catch (const std::exception& e) {
    *drop_connection = true;
    if (guard.fired()) return std::string("no answer before the deadline");
    return file + ": " + Trim(e.what());
  }
}

}  // namespace sbd
