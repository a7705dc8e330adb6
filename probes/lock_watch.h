#pragma once

#include <cstdint>
#include <functional>

namespace sbd {

/// How a lock store's watch is doing, for metrics and /status. Plain value type.
struct LockWatchStatus {
  /// True while a watch stream is established; false while it is being re-established.
  bool up = false;
  /// Established streams that broke (the store restarted, the connection dropped, the store
  /// cancelled the watch); each is re-established with backoff.
  std::uint64_t breaks = 0;
  /// Times the watch reported that the lock's holder may have changed.
  std::uint64_t changes = 0;
};

/// A lock store's watch on its lock record: it calls `Changed` the moment the store says the
/// holder changed, so that a round can start at once instead of at the next interval. It only
/// hastens rounds: polling goes on beside it, so a lost watch costs speed, never detection.
/// Runs from construction (on the event loop for etcd, Sentinel and ZooKeeper: no thread of
/// its own); after the destructor returns, `Changed` is never called. Status() is thread-safe.
class LockWatch {
 public:
  /// Called on the loop thread; must be quick and thread-safe (Scheduler::Wake is).
  using Changed = std::function<void()>;
  virtual ~LockWatch() = default;
  virtual LockWatchStatus Status() const = 0;
};

}  // namespace sbd
