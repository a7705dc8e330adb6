#include "probes/deadline_watchdog.h"

#include <sys/socket.h>

namespace sbd {

DeadlineWatchdog::Guard::~Guard() {
  if (owner_ != nullptr) owner_->Disarm(id_);
}

bool DeadlineWatchdog::Guard::fired() const { return owner_ != nullptr && owner_->Fired(id_); }

DeadlineWatchdog& DeadlineWatchdog::Instance() {
  static DeadlineWatchdog instance;
  return instance;
}

DeadlineWatchdog::DeadlineWatchdog() : thread_([this] { Run(); }) {}

DeadlineWatchdog::~DeadlineWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

DeadlineWatchdog::Guard DeadlineWatchdog::Arm(int fd, Clock::time_point deadline) {
  std::uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    entries_[id] = Entry{fd, deadline, false};
  }
  cv_.notify_all();
  return Guard(this, id);
}

void DeadlineWatchdog::Disarm(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(id);
}

bool DeadlineWatchdog::Fired(std::uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.fired;
}

void DeadlineWatchdog::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    auto next = Clock::time_point::max();
    auto now = Clock::now();
    for (auto& [id, entry] : entries_) {
      if (entry.fired) continue;
      if (entry.deadline <= now) {
        // Disarm() takes the same lock, so the fd cannot be closed under us.
        ::shutdown(entry.fd, SHUT_RDWR);
        entry.fired = true;
      } else if (entry.deadline < next) {
        next = entry.deadline;
      }
    }
    if (next == Clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, next);
    }
  }
}

}  // namespace sbd
