#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "probes/lock_watch.h"

namespace sbd {

/// True when a Sentinel event (`channel`, `payload`) concerns master `master_name`: a
/// +switch-master of it ("<name> <old ip> <old port> <new ip> <new port>"), or a +sdown or
/// +odown of it or of an instance of its group ("master <name> ..." or "... @ <name> ...").
/// Pure.
bool SentinelEventConcerns(const std::string& channel, const std::string& payload,
                           const std::string& master_name);

/// Watches a Redis group's master through Sentinel's pub/sub: one thread per sentinel keeps a
/// connection SUBSCRIBEd to +switch-master, +sdown and +odown, and calls `on_change` on every
/// event that concerns `master_name`. A lost connection is re-established with backoff (100 ms
/// doubling to 5 s) and counted as a break; `up` while at least one sentinel's subscription
/// stands. Messages are read with a bound on their size. The destructor stops and joins every
/// thread (within about 250 ms). Status() is thread-safe.
class SentinelWatch : public LockWatch {
 public:
  SentinelWatch(std::vector<std::string> sentinels, std::string master_name, Changed on_change);
  ~SentinelWatch() override;
  SentinelWatch(const SentinelWatch&) = delete;
  SentinelWatch& operator=(const SentinelWatch&) = delete;
  LockWatchStatus Status() const override;

 private:
  /// Follows one sentinel until stopped.
  void Run(const std::string& address);
  /// One subscription on `address`: true when it was established before it ended.
  bool Follow(const std::string& address);
  bool Stopping() const;

  const std::string master_name_;
  const Changed on_change_;
  std::atomic<int> subscribed_{0};
  std::atomic<std::uint64_t> breaks_{0};
  std::atomic<std::uint64_t> changes_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace sbd
