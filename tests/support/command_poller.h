// A manager's own command-line view run on a schedule beside the detector, the way users run it
// from cron or `watch -n 1` (`repmgr cluster show`, `pg_autoctl show state`): the figure a page
// is measured against, in the same run.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/files.h"
#include "tests/support/process.h"

namespace sbd::testing {

/// Runs `run` from its own thread, one run started every `period` (or right after the last, if
/// it took longer). Keeps the first run whose output `shows` accepts: when it ended, its exit
/// code and output; after it, no more runs.
class CommandPoller {
 public:
  using Clock = std::chrono::steady_clock;
  CommandPoller(std::function<CommandResult()> run, std::function<bool(const std::string&)> shows,
                std::chrono::milliseconds period)
      : run_(std::move(run)),
        shows_(std::move(shows)),
        period_(period),
        thread_([this] { Run(); }) {}
  ~CommandPoller() { Stop(); }
  CommandPoller(const CommandPoller&) = delete;
  CommandPoller& operator=(const CommandPoller&) = delete;

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  bool Seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  Clock::time_point SeenAt() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_at_;
  }
  /// The first run `shows` accepted, else the last run: exit code and output.
  std::string Shown() const {
    std::lock_guard<std::mutex> lock(mu_);
    return "exit code " + std::to_string(exit_code_) + " after " + std::to_string(runs_) +
           " runs:\n" + output_;
  }
  /// Waits up to `window` after `onset` for the first sign, stops, and prints "<label>: <event>
  /// to first sign: X s" (or "none within N s"), then the run shown under `shown_as`. A figure
  /// either way, never a failure: bench/kinds-onset reads the first line.
  void Report(const std::string& label, const std::string& event, Clock::time_point onset,
              std::chrono::seconds window, const std::string& shown_as) {
    WaitFor([&] { return Seen() || Clock::now() - onset >= window; }, window);
    Stop();
    std::cout << label << ": " << event << " to first sign: ";
    if (Seen()) {
      std::cout << std::chrono::duration<double>(SeenAt() - onset).count() << " s\n";
    } else {
      std::cout << "none within " << window.count() << " s\n";
    }
    std::cout << shown_as << ", " << Shown() << "\n";
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const auto next = Clock::now() + period_;
      lock.unlock();
      const CommandResult result = run_();
      const auto ended = Clock::now();
      const bool shown = shows_(result.output);
      lock.lock();
      ++runs_;
      exit_code_ = result.exit_code;
      output_ = result.output;
      if (shown) {
        seen_ = true;
        seen_at_ = ended;
        return;
      }
      wake_.wait_until(lock, next, [this] { return stop_; });  // the schedule, not a condition
    }
  }

  const std::function<CommandResult()> run_;
  const std::function<bool(const std::string&)> shows_;
  const std::chrono::milliseconds period_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool seen_ = false;
  Clock::time_point seen_at_;
  int runs_ = 0;
  int exit_code_ = 0;
  std::string output_;
  std::thread thread_;
};

/// The rows of a psql-style table (`|`-separated cells, trimmed), header and rules included.
inline std::vector<std::vector<std::string>> TableRows(const std::string& output) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> columns;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, '|')) columns.push_back(Trim(cell));
    rows.push_back(std::move(columns));
  }
  return rows;
}

}  // namespace sbd::testing
