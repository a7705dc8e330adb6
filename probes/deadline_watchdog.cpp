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
  bool earliest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    entries_[id] = Entry{fd, deadline, false};
    earliest = pending_.empty() || deadline < pending_.begin()->first;
    pending_.emplace(deadline, id);
  }
  // The watchdog sleeps until the earliest deadline; only a new earliest must wake it.
  if (earliest) cv_.notify_one();
  return Guard(this, id);
}

void DeadlineWatchdog::Disarm(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  pending_.erase({it->second.deadline, id});
  entries_.erase(it);
}

bool DeadlineWatchdog::Fired(std::uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.fired;
}

void DeadlineWatchdog::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const auto now = Clock::now();
    while (!pending_.empty() && pending_.begin()->first <= now) {
      Entry& entry = entries_.at(pending_.begin()->second);
      // Disarm() takes the same lock, so the fd cannot be closed under us.
      ::shutdown(entry.fd, SHUT_RDWR);
      entry.fired = true;
      pending_.erase(pending_.begin());
    }
    if (pending_.empty()) {
      cv_.wait(lock);
    } else {
      // A copy: wait_until reads its argument again after waking, and Disarm() may have
      // erased that set node meanwhile (AddressSanitizer found the use after free).
      const Clock::time_point earliest = pending_.begin()->first;
      cv_.wait_until(lock, earliest);
    }
  }
}

}  // namespace sbd
