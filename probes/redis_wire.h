#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

struct redisReader;
struct redisReply;

namespace sbd {

/// The most bytes one pipeline's replies may take on the wire. Everything the probes ask for
/// (INFO, ROLE, SENTINEL master, a lease key cut to max_token_bytes, a SCAN batch) is a few
/// KiB; a server sending more is broken or hostile, and hiredis 0.14 would buffer it all.
constexpr std::size_t kMaxRedisPipelineBytes = 4 * 1024 * 1024;
/// The most array elements one reply may announce, nested arrays together: hiredis 0.14
/// allocates each element table for the announced count before any element arrives.
constexpr int kMaxRedisArrayElements = 64 * 1024;

/// One connection's count of the array elements its reply announces: the event loop reads every
/// connection's replies on one thread, a reply half read on each, so the count is kept per
/// connection and cannot leak from one connection's reply into another's.
struct RedisReplyCaps {
  long long elements_left = kMaxRedisArrayElements;
  int refused_elements = -1;  ///< the announcement refused, if any
  /// Starts counting a new reply.
  void Begin() {
    elements_left = kMaxRedisArrayElements;
    refused_elements = -1;
  }
  /// After the reader failed: the words for an array over the element cap, if that was why.
  std::optional<std::string> RefusedArrayError() const;
};

/// Makes `reader` (using hiredis' own reply constructors) refuse a reply whose arrays announce
/// more than kMaxRedisArrayElements elements in all, counted in `caps` (which must outlive the
/// reader): call caps->Begin() before each reply, caps->RefusedArrayError() after a reader
/// error.
void LimitRedisReader(redisReader* reader, RedisReplyCaps* caps);

/// One reply of a pipelined command: an error reply (text), a string, or an array of strings
/// (nested or integer elements are flattened to their text).
struct RedisValue {
  bool error = false;
  std::string text;
  std::vector<std::string> items;
};

/// The reply as a RedisValue (what the probes read).
RedisValue RedisValueOf(const redisReply& reply);

}  // namespace sbd
