#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sbd {

/// The most threads the probe pool ever has, whatever the number of clusters and members.
constexpr size_t kMaxProbeThreads = 32;

/// A bounded pool of threads that run the blocking calls (lock stores, managers, member probes
/// that do not run on the event loop), with a queue. Thread-safe.
class ProbeExecutor {
 public:
  explicit ProbeExecutor(size_t threads);
  ~ProbeExecutor();
  ProbeExecutor(const ProbeExecutor&) = delete;
  ProbeExecutor& operator=(const ProbeExecutor&) = delete;
  /// Runs `task` on a pool thread; an exception it throws is counted, never propagated.
  void Submit(std::function<void()> task);
  /// Grows the pool to at least `threads`, never beyond kMaxProbeThreads (discovery adds
  /// members at run time); past that bound calls wait in the queue.
  void EnsureThreads(size_t threads);
  size_t threads() const;

 private:
  void Work();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace sbd
