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
  /// WAL it wrote past the point where its timeline and the other's parted; nullopt when
  /// unknown, and then `unknown_reason` says why (never a made-up zero).
  std::optional<std::uint64_t> wal_bytes_since_fork;
  std::string unknown_reason;
};

/// How bad a split brain is: where the lineage forked, what each writable member wrote since,
/// and how long two were writable at once. Plain value type.
struct WriteWindow {
  std::string fork_lsn;             ///< where the newest timeline left its parent; empty if unknown
  std::int64_t fork_timeline = 0;   ///< that newest timeline; 0 when unknown
  std::string fork_unknown_reason;  ///< why `fork_lsn` is empty
  /// From the later start of two writable streaks to the earlier latest writable reading.
  std::optional<double> double_write_seconds;
  std::vector<HolderWrites> holders;  ///< members of the lineage writable now, in member order
};

/// The write window of a cluster in an incident (`incident`: a split brain open or two
/// writable in its lineage), from each member's history; nullopt outside one. The fork point
/// comes from the timeline history the newest writable member's probe read.
std::optional<WriteWindow> AssessWriteWindow(const ClusterSpec& spec, const ClusterHistory& history,
                                             bool incident);

}  // namespace sbd
