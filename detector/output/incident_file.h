#pragma once

// The incident log's file: its JSON-lines format, reading it back at start, and the one thread
// that writes it, so that a slow or hung disk never holds the round that records an event.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "detector/config/config.h"
#include "probes/probe.h"

namespace sbd {

/// Files larger than this are read from their last 16 MiB only (the newest events).
constexpr std::uintmax_t kMaxIncidentFileBytes = 16u << 20;

/// One recorded change of one cluster. Plain value type.
struct IncidentEvent {
  WallClock::time_point time;
  std::string cluster;
  /// verdict_changed | member_state_changed | split_brain_opened | split_brain_closed |
  /// cluster_added | cluster_removed | remediation (an action's outcome, or a dry run's)
  std::string kind;
  /// A JSON object: names, verdicts, states and reasons; never a DSN or a password.
  nlohmann::json fields = nlohmann::json::object();
};

/// {"time": RFC 3339 UTC with milliseconds, "cluster", "kind", "fields"}.
nlohmann::json IncidentEventJson(const IncidentEvent& event);

/// The event as one line of the file (its JSON with the format's version), newline included.
std::string IncidentFileLine(const IncidentEvent& event);

/// A string field of an event's fields (or of any object read back), "" when absent or of
/// another type: the file is untrusted, and nlohmann's value() would throw on a wrong type.
std::string IncidentField(const nlohmann::json& object, const char* key);

/// What reading an incident log file found. Plain value type.
struct IncidentFile {
  std::vector<IncidentEvent> events;  ///< oldest first, none older than the retention
  std::uint64_t skipped_lines = 0;    ///< corrupt, truncated, unknown or from the future
  std::uint64_t expired = 0;          ///< well-formed but older than the retention
  std::uint64_t lines = 0;            ///< every line read, kept or not
  std::string error;                  ///< why the file could not be read ("" when it could)
};

/// Reads a JSON-lines incident file, at most its last `max_bytes`. Never throws: a line that is
/// not an event this version wrote (bad JSON, unknown kind or version, a time more than a day
/// after `now`) is skipped and counted. A missing file is empty, not an error. Thread-safe.
IncidentFile ReadIncidentFile(const std::string& path, Millis retention, WallClock::time_point now,
                              std::uintmax_t max_bytes = kMaxIncidentFileBytes);

/// One thread that does every file write of the log, in the order queued. The queue holds at
/// most `max_queued` writes; a rewrite queued (or forced by a full queue) replaces every write
/// waiting before it, since it holds all they would have written. Owned jointly by the log and
/// its thread, so that a thread still stuck on a hung disk at exit outlives the log.
/// Thread-safe.
class IncidentFileWriter {
 public:
  /// Called on the writer thread before each file write; tests hold it to hang the disk.
  using WriteHook = std::function<void()>;

  IncidentFileWriter(std::string path, size_t max_queued, WriteHook before_write);
  IncidentFileWriter(const IncidentFileWriter&) = delete;
  IncidentFileWriter& operator=(const IncidentFileWriter&) = delete;

  /// Starts the thread; it holds `self` until Stop().
  static void Start(const std::shared_ptr<IncidentFileWriter>& self);
  /// False when the queue is full: the caller then queues a rewrite instead.
  bool Append(std::string lines);
  /// Always queued: replaces what waits. Returns how many appends it replaced.
  size_t Rewrite(std::string content);
  /// Waits until every write queued so far has landed (or failed); false after `timeout`.
  bool Flush(Millis timeout);
  /// Drains within `timeout`; a thread still writing after that is left to finish alone.
  void Stop(Millis timeout);

 private:
  struct Job {
    bool rewrite = false;
    std::string text;
  };

  bool Queue(Job job);
  void Run();
  void AppendLines(const std::string& lines);
  void WriteWhole(const std::string& content);

  const std::string path_;
  const size_t max_queued_;
  const WriteHook before_write_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<Job> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
  // The writer thread's own.
  std::ofstream file_;
  bool failing_ = false;  ///< logged once until a write succeeds again
};

}  // namespace sbd
