#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

namespace sbd {

/// Enforces probe deadlines on blocking socket I/O: when a deadline passes, the armed
/// socket is shut down so that the blocked libpq call returns at once with an error.
/// Server-side timeouts cannot do this for a frozen server, whose kernel still ACKs.
/// Thread-safe; one process-wide instance.
class DeadlineWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  /// Keeps a socket armed while alive; disarms on destruction. Not thread-safe.
  class Guard {
   public:
    Guard(DeadlineWatchdog* owner, std::uint64_t id) : owner_(owner), id_(id) {}
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard();
    /// True when the deadline passed and the socket was shut down.
    bool fired() const;

   private:
    DeadlineWatchdog* owner_;
    std::uint64_t id_;
  };

  static DeadlineWatchdog& Instance();

  /// Arms `fd` until the returned guard dies; the fd must stay open that long.
  Guard Arm(int fd, Clock::time_point deadline);

  DeadlineWatchdog(const DeadlineWatchdog&) = delete;
  DeadlineWatchdog& operator=(const DeadlineWatchdog&) = delete;
  ~DeadlineWatchdog();

 private:
  struct Entry {
    int fd;
    Clock::time_point deadline;
    bool fired;
  };
  DeadlineWatchdog();
  void Run();
  void Disarm(std::uint64_t id);
  bool Fired(std::uint64_t id) const;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, Entry> entries_;
  /// Unfired entries by deadline: the watchdog looks only at the earliest, so that thousands
  /// of armed probes cost O(log n) each, not a scan per arm.
  std::set<std::pair<Clock::time_point, std::uint64_t>> pending_;
  std::uint64_t next_id_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace sbd
