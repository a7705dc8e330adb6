#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/async_probe.h"
#include "probes/probe.h"
#include "probes/redis_info.h"
#include "probes/redis_wire.h"

namespace sbd {

/// How long after a failover Sentinel may take to turn an old master that still reports
/// master into a replica: it waits 4 publish periods (8 s) after the role report, and reads a
/// replica's INFO every 10 s. Measured here: 11 s for redis-sentinel 7.0.
constexpr std::chrono::milliseconds kSentinelHandoverBound{20000};

/// How long one sentinel alone may say it is failing the master over before the others agree:
/// the leader promotes a replica before any other sentinel knows, sees the promotion within its
/// 1 s INFO period and announces the new configuration at once (its hello, every 2 s after).
constexpr std::chrono::milliseconds kSentinelAgreementBound{3000};

/// How the detector authenticates to the sentinels (their `requirepass`, or an ACL user):
/// apart from the members', since Sentinel keeps its own users.
struct SentinelAuth {
  std::string username;  ///< ACL user; empty for the default user
  /// Where the password comes from, if anywhere: read again at every connect.
  std::optional<std::string> password_file;
  std::optional<std::string> password_env;
  std::optional<RedisTlsSpec> tls;  ///< set when the block says `tls: true`
};

/// Sentinel's record of a Redis replication group: every configured sentinel is asked
/// `SENTINEL get-master-addr-by-name` and `SENTINEL master` (one round trip each, over a kept
/// connection on the event loop: every sentinel is asked at once, each within the whole
/// deadline, so a hung sentinel costs no other one's time and holds no thread), and the master a
/// strict majority of the configured sentinels names is the holder; its config-epoch is the epoch
/// (the fencing token of a failover). Sentinels that disagree or do not answer go into
/// `LockRecord::dissent`. A failover is `handover_in_progress` while a strict majority of the
/// configured sentinels report it (in progress, or a newer master than the majority's), for at
/// most kSentinelHandoverBound; a minority's report is dissent, and believed only in its first
/// kSentinelAgreementBound (see BoundHandover). Read-only. Start() on the loop thread, one at a
/// time; the object may be destroyed on any thread.
class SentinelStore : public AsyncLockStore {
 public:
  /// `members` map the address Sentinel names to a member's name.
  SentinelStore(std::vector<std::string> sentinels, std::string master_name,
                std::vector<MemberSpec> members, SentinelAuth auth = {},
                EventLoop& loop = EventLoop::Shared());
  ~SentinelStore() override;
  SentinelStore(const SentinelStore&) = delete;
  SentinelStore& operator=(const SentinelStore&) = delete;
  void Start(SteadyClock::time_point deadline, Done done) override;
  EventLoop& loop() override { return loop_; }
  /// A SentinelWatch on the same sentinels: +switch-master, +sdown and +odown of the group.
  std::unique_ptr<LockWatch> Watch(LockWatch::Changed on_change) override;

  /// Pure: the record from each sentinel's answer (a view or why there is none), in the order
  /// of `sentinels`. A failure when no sentinel answered. `minority_votes`, when given, is set
  /// to the number of sentinels reporting a failover when they are fewer than a majority (and
  /// a majority names a holder); left alone otherwise.
  static std::variant<LockRecord, ProbeFailure> Vote(
      const std::vector<std::string>& sentinels,
      const std::vector<std::variant<SentinelView, ProbeFailure>>& answers,
      const std::vector<MemberSpec>& members, int* minority_votes = nullptr);

  /// When this store first read the failover now reported, by a majority or by a minority of
  /// the sentinels; each unset while there is none.
  struct HandoverClock {
    std::optional<WallClock::time_point> majority_since;
    std::optional<WallClock::time_point> minority_since;
  };

  /// Pure but for `clock`: bounds how long a reported failover may excuse anything. A
  /// majority's (`handover_in_progress` from Vote) for kSentinelHandoverBound after it was first
  /// read; a minority's (`minority_votes` sentinels, from Vote) for kSentinelAgreementBound
  /// only, the time the others take to hear of a failover the leader has just made. Sets or
  /// clears `handover_in_progress` accordingly, saying why in dissent.
  static void BoundHandover(LockRecord& view, int minority_votes, HandoverClock& clock,
                            WallClock::time_point now);

 private:
  struct Session;
  std::vector<std::string> sentinels_;
  std::string master_name_;
  SentinelAuth auth_;
  EventLoop& loop_;
  std::shared_ptr<Session> session_;
};

}  // namespace sbd
