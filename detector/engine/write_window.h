#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "detector/verdicts/verdict.h"

namespace sbd {

/// What one writable member of a split brain wrote and when. Plain value type.
struct HolderWrites {
  std::string member;
  std::optional<WallClock::time_point> first_writable;  ///< start of its writable streak
  std::optional<WallClock::time_point> last_writable;   ///< its latest writable reading
  /// WAL (Redis: replication stream) it wrote past the point where its timeline (replication
  /// id) and the other's parted; nullopt when unknown, and then `unknown_reason` says why (never a
  /// made-up zero).
  std::optional<std::uint64_t> wal_bytes_since_fork;
  std::string unknown_reason;
};

/// How bad a split brain is: where the lineage forked, what each writable member wrote since,
/// and how long two were writable at once. Plain value type.
struct WriteWindow {
  std::string fork_lsn;            ///< where the newest timeline left its parent; empty if unknown
  std::int64_t fork_timeline = 0;  ///< that newest timeline; 0 when unknown
  /// Redis: the offset of the old replication stream at which the promoted master left it.
  std::optional<std::int64_t> fork_repl_offset;
  std::string fork_unknown_reason;  ///< why the fork point is unknown
  /// The fork point for people ("0/3000060 (timeline 2)", "replication offset 1234"); empty
  /// when unknown, and then `fork_unknown_reason` says why.
  std::string ForkPoint() const {
    if (!fork_lsn.empty()) return fork_lsn + " (timeline " + std::to_string(fork_timeline) + ")";
    if (fork_repl_offset) return "replication offset " + std::to_string(*fork_repl_offset);
    return "";
  }
  /// What the holders' bytes since the fork count: "WAL" (PostgreSQL), "replication stream"
  /// (Redis); a lease claim has no write position, so its holders say why they are unknown.
  std::string written = "WAL";
  /// From the later start of two writable streaks to the earlier latest writable reading.
  std::optional<double> double_write_seconds;
  std::vector<HolderWrites> holders;  ///< members of the lineage writable now, in member order
};

/// The write window of a cluster in an incident (`incident`: a split brain open or two
/// writable in its lineage), from each member's history; nullopt outside one. PostgreSQL: the
/// fork point comes from the timeline history the newest writable member's probe read. Redis:
/// from the promoted master's `second_repl_offset`, and each master's bytes since from its
/// `master_repl_offset`.
std::optional<WriteWindow> AssessWriteWindow(const ClusterSpec& spec, const ClusterHistory& history,
                                             bool incident);

}  // namespace sbd
