#pragma once

#include <map>
#include <memory>
#include <pqxx/connection>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/probe.h"

namespace sbd {

/// The largest timeline history file read, in bytes; a longer one is refused, not truncated.
constexpr std::size_t kMaxTimelineHistoryBytes = 64 * 1024;

/// Parses the text of `timeline`'s history file (pg_wal/<TLI>.history): one line per
/// ancestor, "parentTLI<TAB>switchpoint LSN<TAB>reason", blank and '#' lines skipped. Strict:
/// parents must increase and stay below `timeline`, switch points must not go back, and the
/// text is at most kMaxTimelineHistoryBytes. Returns the switches, oldest first, or an error.
std::variant<std::vector<TimelineSwitch>, std::string> ParseTimelineHistory(const std::string& text,
                                                                            std::int64_t timeline);

/// The libpq connection string of a member's probe: its DSN plus the probe's timeouts,
/// keepalives, application name and the resolved password (quoted). Never logged: it may hold
/// a secret. A kConfig failure when the password file is unusable.
std::variant<std::string, ProbeFailure> PostgresConninfo(const MemberSpec& member, Millis timeout,
                                                         SteadyClock::time_point deadline);

/// The reason of a libpq connection failure, from its text (libpq gives no code). Pure.
ProbeFailureReason ClassifyConnectError(const std::string& message);

/// The reason of a failed statement, from its SQLSTATE. Pure.
ProbeFailureReason ClassifySqlState(const std::string& sqlstate);

/// "pg_wal/0000000A.history": where `timeline`'s history file lives in the data directory.
std::string TimelineHistoryFile(std::int64_t timeline);

/// The read-only statement that reads `timeline`'s history file (one character past the limit,
/// so that a longer file is refused, not truncated).
std::string TimelineHistoryQuery(std::int64_t timeline);

/// Probes one PostgreSQL member through libpqxx over a persistent, read-only session.
/// The connection is rebuilt after any failure that may have broken it. Every call is
/// bounded: connect_timeout while connecting, then the deadline watchdog shuts the socket
/// down if the server stops answering (a frozen server never trips statement_timeout).
/// Not thread-safe: one Probe() at a time per instance.
class PostgresProbe : public MemberProbe {
 public:
  PostgresProbe(MemberSpec member, Millis timeout);
  ~PostgresProbe() override;
  PostgresProbe(const PostgresProbe&) = delete;
  PostgresProbe& operator=(const PostgresProbe&) = delete;

  Observation Probe(SteadyClock::time_point deadline, StartGate* gate) override;

  /// The SQL of one reading: one round trip, read-only, visible for review.
  static const char* ReadingQuery();

 private:
  std::variant<std::string, ProbeFailure> ConnectionString(SteadyClock::time_point deadline) const;

  /// Runs the reading query on the open connection under the deadline watchdog.
  std::variant<PostgresReading, ProbeFailure> Read(SteadyClock::time_point deadline,
                                                   bool* drop_connection);

  /// Fills the reading's timeline history, on a writable member above timeline 1: from the
  /// cache, else read (read-only, under the deadline) at most once a minute after a failure.
  void AddTimelineHistory(PostgresReading& reading, SteadyClock::time_point deadline,
                          bool* drop_connection);
  /// Reads and parses the history file of `timeline`: the switches, or why they are unknown.
  std::variant<std::vector<TimelineSwitch>, std::string> ReadTimelineHistory(
      std::int64_t timeline, SteadyClock::time_point deadline, bool* drop_connection);

  /// A timeline's history, or the last failure to read it and when it happened.
  struct HistoryEntry {
    std::vector<TimelineSwitch> switches;
    std::string error;
    SteadyClock::time_point failed_at{};
  };

  MemberSpec member_;
  Millis timeout_;
  /// Keyed by (system identifier, timeline); a few entries at most (cleared when it grows).
  std::map<std::pair<std::string, std::int64_t>, HistoryEntry> histories_;
  std::unique_ptr<pqxx::connection> conn_;
};

}  // namespace sbd
