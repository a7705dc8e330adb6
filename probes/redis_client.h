#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/probe.h"

struct redisContext;
struct redisReply;

namespace sbd {

/// One reply of a pipelined command: an error reply (text), a string, or an array of strings
/// (nested or integer elements are flattened to their text).
struct RedisValue {
  bool error = false;
  std::string text;
  std::vector<std::string> items;
};

/// The reply as a RedisValue (what both transports hand back).
RedisValue RedisValueOf(const redisReply& reply);

class RedisTlsConnection;

/// One kept connection to a Redis server or sentinel (hiredis, blocking, with timeouts), used
/// by the Sentinel pub/sub watch on its own threads (the member probe and the lock stores read
/// on the event loop: LoopRedisConnection, probes/redis_loop.h). Every call is bounded by its
/// deadline: the connect by redisConnectWithTimeout, each read and write by redisSetTimeout set to
/// the time left. With `tls` set, the connection is a RedisTlsConnection instead (same deadlines,
/// same reply caps). Any I/O failure drops the connection; the next call reconnects. Not
/// thread-safe; not copyable.
class RedisClient {
 public:
  /// `password` (if any) is sent with AUTH, with `username` when not empty (an ACL user).
  RedisClient(std::string address, std::string username, std::optional<std::string> password,
              std::optional<RedisTlsSpec> tls = std::nullopt);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  /// Connects and authenticates unless already connected; nullopt on success.
  std::optional<ProbeFailure> Connect(SteadyClock::time_point deadline);
  /// Sends every command at once and reads every reply: one round trip. Needs Connect().
  std::variant<std::vector<RedisValue>, ProbeFailure> Pipeline(
      const std::vector<std::vector<std::string>>& commands, SteadyClock::time_point deadline);
  /// Sends `command` without reading its reply: for SUBSCRIBE, whose replies come as pushes
  /// read with NextReply(). Needs Connect().
  std::optional<ProbeFailure> Send(const std::vector<std::string>& command,
                                   SteadyClock::time_point deadline);
  /// The next reply the server sends (a subscription's confirmations and messages), waiting
  /// until `until`: nullopt when none is complete by then, and the connection stays (a reply
  /// half read goes on at the next call). Under Pipeline()'s caps, per reply: its arrays
  /// announce at most kMaxRedisArrayElements elements in all and it takes at most
  /// kMaxRedisPipelineBytes; beyond either, a kProtocol failure naming the cap, and the
  /// connection is dropped. The element count is this thread's (probes/redis_wire.h): read
  /// one client's pushes on a thread that reads no other Redis reply meanwhile.
  std::variant<std::optional<RedisValue>, ProbeFailure> NextReply(SteadyClock::time_point until);
  /// Drops the connection (the next call reconnects).
  void Close();
  const std::string& address() const { return address_; }

 private:
  std::optional<ProbeFailure> Authenticate(SteadyClock::time_point deadline);
  std::optional<ProbeFailure> SetTimeout(SteadyClock::time_point deadline);
  ProbeFailure IoFailure(const char* doing);

  std::string address_;
  std::string username_;
  std::optional<std::string> password_;
  std::optional<RedisTlsSpec> tls_;
  std::variant<std::optional<RedisValue>, ProbeFailure> NextPlainReply(
      SteadyClock::time_point until);
  /// Starts a pushed reply's caps unless one is half read.
  void BeginPushedReply();

  redisContext* context_ = nullptr;
  std::unique_ptr<RedisTlsConnection> tls_connection_;  ///< only with `tls_`
  bool push_started_ = false;                           ///< NextReply() has a reply half read
  std::size_t push_budget_ = 0;  ///< bytes the half-read pushed reply may still take
};

}  // namespace sbd
