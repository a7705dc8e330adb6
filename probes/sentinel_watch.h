#pragma once

#include <memory>
#include <string>
#include <vector>

#include "probes/event_loop.h"
#include "probes/lock_watch.h"
#include "probes/sentinel.h"

namespace sbd {

/// True when a Sentinel event (`channel`, `payload`) concerns master `master_name`: a
/// +switch-master of it ("<name> <old ip> <old port> <new ip> <new port>"), or a +sdown or
/// +odown of it or of an instance of its group ("master <name> ..." or "... @ <name> ...").
/// Pure.
bool SentinelEventConcerns(const std::string& channel, const std::string& payload,
                           const std::string& master_name);

/// Watches a Redis group's master through Sentinel's pub/sub, on the event loop (issue 25): one
/// LoopRedisConnection per sentinel in subscribe mode stays SUBSCRIBEd to +switch-master, +sdown
/// and +odown, and `on_change` is called on every event that concerns `master_name`. No thread
/// is held, however many sentinels and clusters are watched. It connects as the SentinelStore
/// does (AUTH with `auth`'s user and password, read again at each connect; TLS when `auth.tls`),
/// within 2 s for the connect and 2 s for the subscription's confirmations; after that each
/// pushed reply is capped as the store's replies are (kMaxRedisArrayElements array elements,
/// kMaxRedisPipelineBytes bytes) and, once begun, must be complete within 2 s. A breach ends that
/// subscription naming the bound. A lost subscription is re-established with backoff (100 ms
/// doubling to 5 s) and counted as a break; `up` while at least one sentinel's subscription
/// stands. Construct and destroy on any thread: after the destructor returns, `on_change` is
/// never called (the connections close on the loop soon after). Status() and LastFailure() are
/// thread-safe.
class SentinelWatch : public LockWatch {
 public:
  SentinelWatch(std::vector<std::string> sentinels, std::string master_name, Changed on_change,
                SentinelAuth auth = {}, EventLoop& loop = EventLoop::Shared());
  ~SentinelWatch() override;
  SentinelWatch(const SentinelWatch&) = delete;
  SentinelWatch& operator=(const SentinelWatch&) = delete;
  LockWatchStatus Status() const override;
  /// Why the latest subscription that failed or ended did ("<sentinel>: <reason>"; never a
  /// password), or "" while none has.
  std::string LastFailure() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace sbd
