#pragma once

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/probe.h"
#include "probes/redis_client.h"

namespace sbd {

/// Probes one Redis server of a replication group over a kept connection: `INFO replication`,
/// `INFO server` and `CONFIG GET min-replicas-to-write`, pipelined in one round trip and read
/// only. CONFIG may be refused to an ACL user; then only zero good replicas proves a master
/// fenced. Every call is bounded by its deadline. Not thread-safe: one Probe() at a time.
class RedisProbe : public MemberProbe {
 public:
  /// `username` is the ACL user for AUTH (empty: the default user); the password comes from
  /// the member's password_file or password_env, read at each connect. `tls` when the block
  /// says `tls: true`.
  RedisProbe(MemberSpec member, std::string username,
             std::optional<RedisTlsSpec> tls = std::nullopt);
  Observation Probe(SteadyClock::time_point deadline, StartGate* gate) override;

  /// The commands of one reading, visible for review.
  static const std::vector<std::vector<std::string>>& ReadingCommands();

  /// The reading from the replies to ReadingCommands(), or why there is none.
  static std::variant<RedisReading, ProbeFailure> ReadingFrom(
      const std::vector<RedisValue>& replies);

 private:
  std::optional<ProbeFailure> EnsureConnected(SteadyClock::time_point deadline);

  MemberSpec member_;
  std::string username_;
  std::optional<RedisTlsSpec> tls_;
  std::unique_ptr<RedisClient> client_;
};

}  // namespace sbd
