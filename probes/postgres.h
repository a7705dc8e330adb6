#pragma once

#include <string>
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

/// The SQL of one reading of a member (PostgresAsyncProbe sends it): one round trip, one
/// SELECT, read-only, visible for review.
const char* PostgresReadingQuery();

}  // namespace sbd
