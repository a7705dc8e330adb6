#include "probes/postgres.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

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

const char* PostgresReadingQuery() {
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

}  // namespace sbd
