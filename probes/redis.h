#pragma once

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/async_probe.h"
#include "probes/probe.h"
#include "probes/redis_wire.h"

namespace sbd {

/// Probes one Redis server of a replication group over a kept connection: `INFO replication`,
/// `INFO server` and `CONFIG GET min-replicas-to-write`, pipelined in one round trip and read
/// only. CONFIG may be refused to an ACL user; then only zero good replicas proves a master
/// fenced. Runs on the event loop (LoopRedisConnection): one deadline bounds the connect, TLS,
/// AUTH and the replies together, and a slow server holds no thread. The object may be
/// destroyed on any thread; Start() on the loop thread only, one at a time.
class RedisProbe : public AsyncMemberProbe {
 public:
  /// `username` is the ACL user for AUTH (empty: the default user); the password comes from
  /// the member's password_file or password_env, read at each connect. `tls` when the block
  /// says `tls: true`.
  RedisProbe(MemberSpec member, std::string username,
             std::optional<RedisTlsSpec> tls = std::nullopt, EventLoop& loop = EventLoop::Shared());
  ~RedisProbe() override;
  RedisProbe(const RedisProbe&) = delete;
  RedisProbe& operator=(const RedisProbe&) = delete;

  void Start(SteadyClock::time_point deadline, std::shared_ptr<LoopGate> gate, Done done) override;
  EventLoop& loop() override { return loop_; }

  /// The commands of one reading, visible for review.
  static const std::vector<std::vector<std::string>>& ReadingCommands();

  /// The reading from the replies to ReadingCommands(), or why there is none.
  static std::variant<RedisReading, ProbeFailure> ReadingFrom(
      const std::vector<RedisValue>& replies);

 private:
  struct Session;
  EventLoop& loop_;
  std::shared_ptr<Session> session_;
};

}  // namespace sbd
