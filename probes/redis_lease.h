#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "probes/event_loop.h"
#include "probes/probe.h"

struct redisContext;

namespace sbd {

/// Where a Redis lease lives and how to log in. `user` empty: `AUTH <password>` (the default
/// user); `password` empty: no AUTH at all.
struct RedisEndpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string user;
  std::string password;
};

/// Which keys hold the lease: exact names, or one pattern read with a bounded SCAN.
struct LeaseKeys {
  std::vector<std::string> names;  ///< exact key names (used when `pattern` is empty)
  std::string pattern;             ///< a SCAN MATCH pattern, e.g. "locks:*"
  size_t max_keys = 1000;          ///< SCAN stops after this many distinct keys
  size_t max_iterations = 100;     ///< SCAN stops after this many round trips
  size_t max_token_bytes = 4096;   ///< longer values are cut here (and flagged)
};

/// The longest PTTL accepted, in milliseconds (2^53, some 285,000 years): a longer one is no
/// real server's answer, and the read fails saying so instead of wrapping.
constexpr std::int64_t kMaxLeasePttlMs = std::int64_t{1} << 53;

/// What one key says: the holder's token (the value) and the lease left (PTTL).
struct LeaseKeyReading {
  enum class State {
    kHeld,       ///< a string value: `token` is the holder's
    kGone,       ///< no such key (PTTL -2): nobody holds the lease
    kWrongType,  ///< the key exists but is no string (`type` says what it is)
  };
  std::string key;
  State state = State::kGone;
  std::string token;             ///< the value's bytes, at most max_token_bytes; binary-safe
  bool token_truncated = false;  ///< the value was longer (its length is `token_length`)
  std::int64_t token_length = 0;
  /// PTTL in milliseconds: >= 0 left, -1 no TTL (a lease that never expires is a finding),
  /// -2 gone.
  std::int64_t lease_left_ms = -2;
  std::string type;  ///< TYPE's answer: "string", "none", "hash", ...
  ReadingWindow window;
  /// The token for people and logs: non-UTF-8 and control bytes escaped (\xNN), never raw.
  std::string TokenShown() const;
  bool NoTtl() const { return state == State::kHeld && lease_left_ms == -1; }
};

/// A lease's record as one read found it.
struct LeaseRecord {
  std::string endpoint;  ///< host:port that answered
  std::vector<LeaseKeyReading> keys;
  /// SCAN stopped at a cap before the keyspace was covered: what was hit ("max_keys 1000").
  std::string scan_limit_hit;
  ReadingWindow window;  ///< the whole read (SCAN included)
};

class LoopRedisConnection;

/// Reads a lease kept as Redis string keys (`SET key token NX PX ttl`) on the event loop
/// (LoopRedisConnection): for each key TYPE, GETRANGE 0..max_token_bytes-1, STRLEN and PTTL,
/// pipelined in one round trip (GETRANGE, not GET, so that a huge value cannot make us read it
/// all); with a pattern, a bounded SCAN first. Read-only (an ACL user with +@read and +scan
/// suffices). One deadline for the connect, AUTH, every SCAN round and the keys' replies
/// together, so a server that trickles holds no thread. The connection is kept between reads
/// and dropped on any failure. Loop thread only, one Start() at a time; hold it in a shared_ptr.
class LoopLeaseReader : public std::enable_shared_from_this<LoopLeaseReader> {
 public:
  using Done = std::function<void(std::variant<LeaseRecord, ProbeFailure>)>;
  LoopLeaseReader(EventLoop& loop, RedisEndpoint endpoint, LeaseKeys keys);
  ~LoopLeaseReader();
  LoopLeaseReader(const LoopLeaseReader&) = delete;
  LoopLeaseReader& operator=(const LoopLeaseReader&) = delete;

  /// Reads the lease once; `done` is called on the loop thread by the deadline, never from
  /// inside Start(). Failures: kTimeout, kRefused, kUnreachable, kAuth (WRONGPASS, NOAUTH,
  /// NOPERM), kProtocol, kConnectionLost, kQuery, kConfig. A key of another type is no failure:
  /// its reading says kWrongType.
  void Start(SteadyClock::time_point deadline, Done done);
  /// Drops the connection and the read in flight (its `done` is never called).
  void Close();

 private:
  void ScanRound();
  void ReadKeys();
  void Finish(std::variant<LeaseRecord, ProbeFailure> result);

  EventLoop& loop_;
  RedisEndpoint endpoint_;
  LeaseKeys keys_;
  std::shared_ptr<LoopRedisConnection> connection_;
  // The read in flight.
  Done done_;
  SteadyClock::time_point deadline_{};
  LeaseRecord record_;
  std::set<std::string> found_;
  std::string cursor_;
  size_t round_ = 0;
};

}  // namespace sbd
