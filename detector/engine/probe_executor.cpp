#include "detector/engine/probe_executor.h"

#include <algorithm>

#include "detector/common/internal_errors.h"

namespace sbd {

ProbeExecutor::ProbeExecutor(size_t threads) { EnsureThreads(threads); }

ProbeExecutor::~ProbeExecutor() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

void ProbeExecutor::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ProbeExecutor::EnsureThreads(size_t threads) {
  threads = std::min(threads, kMaxProbeThreads);
  std::lock_guard<std::mutex> lock(mu_);
  while (!stop_ && threads_.size() < threads) threads_.emplace_back([this] { Work(); });
}

size_t ProbeExecutor::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

void ProbeExecutor::Work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    Guarded("probe executor", task);
  }
}

}  // namespace sbd
