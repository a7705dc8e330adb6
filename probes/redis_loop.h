#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/event_loop.h"
#include "probes/probe.h"
#include "probes/redis_wire.h"

struct redisReply;
struct redisReader;
struct ssl_st;
struct ssl_ctx_st;
struct addrinfo;

namespace sbd {

struct RedisReplyDeleter {
  void operator()(redisReply* reply) const;
};
/// One parsed reply, freed with hiredis' freeReplyObject.
using RedisReplyPtr = std::unique_ptr<redisReply, RedisReplyDeleter>;

/// One kept connection to a Redis server or sentinel on the event loop (issue 25): a
/// non-blocking socket watched by SocketWatch, commands formatted by hiredis
/// (redisFormatCommandArgv), replies parsed by its reader, and TLS (when `tls` is set) by
/// OpenSSL on the same socket (SSL_connect/SSL_read/SSL_write, waiting on WANT_READ/WANT_WRITE),
/// with the checks of NewRedisTlsSession (CA, server name, TLS 1.2 at least). No thread is held
/// while a peer is slow.
///
/// Bounded as a whole: each call has one deadline, for the connect, the TLS handshake and AUTH
/// (Connect) or for sending and every reply in full (Pipeline); a breach is a kTimeout failure
/// naming the deadline. The replies of one call take at most kMaxRedisPipelineBytes on the wire,
/// each reply's arrays at most kMaxRedisArrayElements elements together (counted per
/// connection), nesting at most hiredis' 7 levels; a breach is a kProtocol failure naming the
/// cap. Any failure drops the connection (the next Connect dials again). No error text holds
/// the password.
///
/// Loop thread only, one call in flight at a time; callbacks run on the loop thread, never from
/// inside the call that started them. Hold it in a shared_ptr (Create): a callback in flight
/// keeps no dangling pointer after the last owner lets go (it is then never called).
class LoopRedisConnection : public std::enable_shared_from_this<LoopRedisConnection> {
 public:
  using Failed = std::optional<ProbeFailure>;
  using Replies = std::variant<std::vector<RedisReplyPtr>, ProbeFailure>;

  /// `password` (if any) is sent with AUTH, with `username` when not empty (an ACL user).
  static std::shared_ptr<LoopRedisConnection> Create(EventLoop& loop, std::string address,
                                                     std::string username,
                                                     std::optional<std::string> password,
                                                     std::optional<RedisTlsSpec> tls);
  ~LoopRedisConnection();
  LoopRedisConnection(const LoopRedisConnection&) = delete;
  LoopRedisConnection& operator=(const LoopRedisConnection&) = delete;

  /// Dials, handshakes and authenticates unless connected; `done(nullopt)` on success.
  void Connect(SteadyClock::time_point deadline, std::function<void(Failed)> done);
  /// Sends every command at once and reads one reply per command. Needs Connect().
  void Pipeline(std::vector<std::vector<std::string>> commands, SteadyClock::time_point deadline,
                std::function<void(Replies)> done);
  /// Subscribe mode (pub/sub): sends `command` (a SUBSCRIBE) and hands every reply that follows
  /// to `push`, in order, until Close() or a failure, which `ended` gets once. Needs Connect().
  /// The first reply must be complete by `deadline`; after it, silence is unbounded (pub/sub is
  /// quiet until something happens), but a reply that has begun must be complete within
  /// `reply_bound`, and each reply is capped as a Pipeline's replies are (kMaxRedisPipelineBytes
  /// bytes, kMaxRedisArrayElements array elements, 7 levels). A breach ends the subscription
  /// with a kTimeout or kProtocol failure naming the bound. `push` may call Close().
  void Subscribe(std::vector<std::string> command, SteadyClock::time_point deadline,
                 std::chrono::milliseconds reply_bound, std::function<void(RedisReplyPtr)> push,
                 std::function<void(ProbeFailure)> ended);
  /// Drops the connection and any call in flight (its callback is never called).
  void Close();
  bool connected() const;
  const std::string& address() const { return address_; }

 private:
  enum class Phase { kClosed, kResolving, kDialing, kHandshake, kReady };
  LoopRedisConnection(EventLoop& loop, std::string address, std::string username,
                      std::optional<std::string> password, std::optional<RedisTlsSpec> tls);

  void BeginCall(SteadyClock::time_point deadline);
  void Resolve();
  void Resolved(int status, std::vector<std::string> addresses);
  void DialNext();
  void Dialed();
  void StartTls();
  void Handshake();
  void TransportUp();
  void Authenticated(Replies replies);
  void Send(const std::vector<std::vector<std::string>>& commands);
  void OnSocket();
  bool Flush();
  bool ReadSome();
  bool TakeReplies();
  bool TakePushes();
  void BoundPartialReply();
  void Rewatch();
  void OnDeadline();
  void Fail(ProbeFailureReason reason, const std::string& what);
  void Succeed();
  void Drop();
  /// Runs `task` later on the loop unless this call has ended by then.
  void Later(std::function<void(LoopRedisConnection&)> task);
  std::string Bound() const;

  EventLoop& loop_;
  std::string address_;
  std::string username_;
  std::optional<std::string> password_;
  std::optional<RedisTlsSpec> tls_;

  Phase phase_ = Phase::kClosed;
  int fd_ = -1;
  std::unique_ptr<SocketWatch> watch_;
  LoopTimer timer_;
  ssl_ctx_st* ctx_ = nullptr;
  ssl_st* ssl_ = nullptr;
  std::string tls_name_;  ///< the server name the certificate was verified for
  redisReader* reader_ = nullptr;
  std::unique_ptr<RedisReplyCaps> caps_;
  std::vector<std::string> addresses_;  ///< resolved sockaddrs, tried in turn
  size_t next_address_ = 0;
  int last_errno_ = 0;

  // The call in flight.
  std::uint64_t call_ = 0;  ///< bumped at each call's end: stale callbacks see another value
  bool in_call_ = false;
  bool authenticating_ = false;
  std::function<void(Failed)> connect_done_;
  std::function<void(Replies)> pipeline_done_;
  SteadyClock::time_point started_{};
  SteadyClock::time_point deadline_{};
  std::string out_;
  size_t out_sent_ = 0;
  size_t expected_ = 0;
  std::vector<RedisReplyPtr> replies_;
  size_t budget_ = 0;
  size_t received_ = 0;
  bool ssl_wants_write_ = false;

  // Subscribe mode: the subscription in flight.
  bool streaming_ = false;
  std::chrono::milliseconds reply_bound_{0};
  std::function<void(RedisReplyPtr)> push_;
  std::function<void(ProbeFailure)> ended_;
  std::uint64_t pushes_ = 0;  ///< replies handed to push_ in this subscription
  bool reply_begun_ = false;  ///< a reply is half read and its reply_bound_ is armed
};

/// A reply as the probes read it (RedisValue, probes/redis_wire.h).
struct RedisValue;
std::vector<RedisValue> RedisValuesOf(const std::vector<RedisReplyPtr>& replies);

}  // namespace sbd
