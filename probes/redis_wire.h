#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

struct redisContext;
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

/// Makes the context's reader refuse a reply whose arrays announce more than
/// kMaxRedisArrayElements elements in all (a protocol error), counted per GetReplyBounded()
/// call: read such a context only through it. Call once per context, after connect.
/// Thread-safe (each context belongs to one thread at a time).
void LimitRedisReplies(redisContext* context);

/// LimitRedisReplies for a reader of our own (the TLS transport feeds one directly): read it
/// with BeginBoundedReply() before each reply and RefusedArrayError() after a reader error.
void LimitRedisReader(redisReader* reader);

/// One reader's own count of the array elements its reply announces, for readers that share a
/// thread with others (the event loop reads every connection's replies on one thread, a reply
/// half read on each): the count then cannot leak from one connection's reply into another's.
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

/// LimitRedisReader with the count kept in `caps` (which must outlive the reader) instead of
/// the thread's: call caps->Begin() before each reply.
void LimitRedisReader(redisReader* reader, RedisReplyCaps* caps);

/// Starts counting a new reply's array elements on this thread.
void BeginBoundedReply();

/// After a limited reader failed: the words for an array over the element cap, if that was
/// the cause (nullopt for any other reader error). Clears it.
std::optional<std::string> RefusedArrayError();

/// redisGetReply for a blocking context, counting the bytes received against `*budget` (what
/// is left of kMaxRedisPipelineBytes for this pipeline): when a reply would exceed it, the
/// read stops with REDIS_ERR, `context->err` REDIS_ERR_PROTOCOL and `errstr` saying so, so a
/// huge bulk string or a long array fails the call instead of growing memory. The same
/// errstr names a refused array length. Thread-safe as above.
int GetReplyBounded(redisContext* context, void** reply, std::size_t* budget);

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
