#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "probes/lock_watch.h"
#include "probes/sentinel.h"

namespace sbd {

/// True when a Sentinel event (`channel`, `payload`) concerns master `master_name`: a
/// +switch-master of it ("<name> <old ip> <old port> <new ip> <new port>"), or a +sdown or
/// +odown of it or of an instance of its group ("master <name> ..." or "... @ <name> ...").
/// Pure.
bool SentinelEventConcerns(const std::string& channel, const std::string& payload,
                           const std::string& master_name);

/// Watches a Redis group's master through Sentinel's pub/sub: one thread per sentinel keeps a
/// connection SUBSCRIBEd to +switch-master, +sdown and +odown, and calls `on_change` on every
/// event that concerns `master_name`. It connects as the SentinelStore does (RedisClient:
/// AUTH with `auth`'s user and password, read again at each connect; TLS when `auth.tls`),
/// and reads each message under the store's reply caps (kMaxRedisArrayElements array
/// elements, kMaxRedisPipelineBytes bytes). A lost connection is re-established with backoff
/// (100 ms doubling to 5 s) and counted as a break; `up` while at least one sentinel's
/// subscription stands. The destructor stops and joins every thread (within about 250 ms).
/// Status() and LastFailure() are thread-safe.
class SentinelWatch : public LockWatch {
 public:
  SentinelWatch(std::vector<std::string> sentinels, std::string master_name, Changed on_change,
                SentinelAuth auth = {});
  ~SentinelWatch() override;
  SentinelWatch(const SentinelWatch&) = delete;
  SentinelWatch& operator=(const SentinelWatch&) = delete;
  LockWatchStatus Status() const override;
  /// Why the latest subscription that failed or ended did ("<sentinel>: <reason>"; never a
  /// password), or "" while none has.
  std::string LastFailure() const;

 private:
  /// Follows one sentinel until stopped.
  void Run(const std::string& address);
  /// One subscription on `address`: true when it was established before it ended.
  bool Follow(const std::string& address);
  /// Reads `client`'s pushes until stopped or failed; counts the subscription and the events.
  void Listen(RedisClient& client, bool* subscribed);
  bool Stopping() const;
  void Failed(const std::string& why);

  const std::string master_name_;
  const Changed on_change_;
  const SentinelAuth auth_;
  std::atomic<int> subscribed_{0};
  std::atomic<std::uint64_t> breaks_{0};
  std::atomic<std::uint64_t> changes_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;     // guarded by mu_
  std::string last_failure_;  // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace sbd
