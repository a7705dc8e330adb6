// Pure parsers of what Redis servers and sentinels answer: no I/O, so they are unit-tested
// and fuzzed on hostile text (tests/redis_info_test.cpp, tests/fuzz/fuzz_redis_info.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <variant>
#include <vector>

#include "probes/probe.h"

namespace sbd {

/// The longest INFO text parsed, in bytes; a longer answer is refused, not truncated.
constexpr std::size_t kMaxRedisInfoBytes = 256 * 1024;

/// Parses the text of `INFO replication` and `INFO server` (concatenated, "key:value" lines
/// with CRLF or LF, "# Section" headers and blank lines skipped). Strict where the verdict
/// depends on it: `role` must be master or slave, `master_replid` 40 hex digits, offsets and
/// counts decimal; an all-zero `master_replid2` means none. Returns the reading or an error
/// that quotes at most a short, printable excerpt of the offending value.
std::variant<RedisReading, std::string> ParseRedisInfo(const std::string& text);

/// Parses the value of `CONFIG GET min-replicas-to-write` (the array's second element) into
/// the reading; anything but a decimal 0..1000000 leaves it unknown. Returns false then.
bool ParseMinReplicasToWrite(const std::string& value, RedisReading& reading);

/// What one sentinel says about the monitored master (`SENTINEL master <name>` as a flat
/// field/value list, plus `SENTINEL get-master-addr-by-name <name>`).
/// The highest config-epoch believed: Sentinel adds one per failover attempt, so a real group
/// stays far below (one attempt a second for 136 years); above it the answer is rejected.
constexpr std::int64_t kMaxSentinelEpoch = 4294967295;

struct SentinelView {
  std::string address;            ///< "ip:port" of the master it records
  std::int64_t config_epoch = 0;  ///< the failover epoch: the fencing token of a failover
  std::string flags;              ///< "master", "master,s_down", "master,o_down", ...
  int quorum = 0;
  bool failover_in_progress = false;  ///< flags name failover_in_progress
};

/// Parses the two answers of one sentinel: `fields` is `SENTINEL master`'s flat list (name,
/// value, name, value, ...), `addr` the two elements of get-master-addr-by-name. Strict on
/// the port, the epoch (0 to kMaxSentinelEpoch) and the quorum; returns the view or an error.
std::variant<SentinelView, std::string> ParseSentinelMaster(const std::vector<std::string>& fields,
                                                            const std::vector<std::string>& addr);

}  // namespace sbd
