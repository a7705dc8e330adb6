#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/probe.h"
#include "probes/redis_client.h"
#include "probes/redis_info.h"

namespace sbd {

/// How long after a failover Sentinel may take to turn an old master that still reports
/// master into a replica: it waits 4 publish periods (8 s) after the role report, and reads a
/// replica's INFO every 10 s. Measured here: 11 s for redis-sentinel 7.0.
constexpr std::chrono::milliseconds kSentinelHandoverBound{20000};

/// Sentinel's record of a Redis replication group: every configured sentinel is asked
/// `SENTINEL get-master-addr-by-name` and `SENTINEL master` (one round trip each, over a kept
/// connection, each sentinel with an equal share of the deadline), and the master a strict
/// majority of the configured sentinels names is the holder; its config-epoch is the epoch
/// (the fencing token of a failover). Sentinels that disagree or do not answer go into
/// `DcsView::dissent`. Read-only. Not thread-safe: one Read() at a time.
class SentinelStore : public LockStore {
 public:
  /// `members` map the address Sentinel names to a member's name.
  SentinelStore(std::vector<std::string> sentinels, std::string master_name,
                std::vector<MemberSpec> members);
  std::variant<DcsView, ProbeFailure> Read(SteadyClock::time_point deadline) override;
  /// A SentinelWatch on the same sentinels: +switch-master, +sdown and +odown of the group.
  std::unique_ptr<LockWatch> Watch(LockWatch::Changed on_change) override;

  /// Pure: the record from each sentinel's answer (a view or why there is none), in the order
  /// of `sentinels`. A failure when no sentinel answered.
  static std::variant<DcsView, ProbeFailure> Vote(
      const std::vector<std::string>& sentinels,
      const std::vector<std::variant<SentinelView, ProbeFailure>>& answers,
      const std::vector<MemberSpec>& members);

 private:
  std::variant<SentinelView, ProbeFailure> Ask(RedisClient& sentinel,
                                               SteadyClock::time_point deadline);

  std::vector<std::string> sentinels_;
  std::string master_name_;
  std::vector<MemberSpec> members_;
  /// Fills the record's previous holder and when this store saw the holder change.
  void RememberHolder(DcsView& view);

  std::vector<std::unique_ptr<RedisClient>> clients_;
  std::string holder_;
  std::string previous_holder_;
  std::optional<WallClock::time_point> holder_changed_at_;
};

}  // namespace sbd
