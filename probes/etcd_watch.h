#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "probes/lock_watch.h"

namespace httplib {
class Client;
}

namespace sbd {

/// What one message of etcd's /v3/watch stream says. Plain value type.
struct EtcdWatchMessage {
  bool created = false;       ///< the watch is established
  std::int64_t revision = 0;  ///< the store's revision in the header; 0 when absent
  /// Each event's key value in order: the new value of a PUT, nullopt for a DELETE.
  std::vector<std::optional<std::string>> values;
  /// Non-empty when the stream is unusable: not etcd's JSON, an error, or the watch cancelled
  /// (a compacted start revision among the reasons).
  std::string error;
  bool compacted = false;  ///< cancelled because the start revision was compacted
};

/// Splits the bytes of a /v3/watch stream (one JSON message a line) into messages. A line
/// longer than `max_line` bytes is an error, so an endless line cannot grow memory. Not
/// thread-safe.
class EtcdWatchStream {
 public:
  explicit EtcdWatchStream(size_t max_line = 1 << 20) : max_line_(max_line) {}
  /// Appends `length` bytes and adds every complete message to `out`; false (and an error
  /// message in `out`) once the stream is unusable.
  bool Feed(const char* data, size_t length, std::vector<EtcdWatchMessage>* out);
  /// Parses one line of the stream.
  static EtcdWatchMessage Parse(const std::string& line);

 private:
  size_t max_line_;
  std::string pending_;
};

/// Watches one etcd key (Patroni's `<namespace>/<scope>/leader`) through the v3 JSON
/// gateway's streaming POST /v3/watch, and calls `on_change` whenever its value changes
/// (put with another value, or delete). Endpoints are tried in turn; a broken stream is
/// re-established with backoff (100 ms doubling to 5 s) from the revision after the last one
/// seen, so no change is missed unless etcd compacted it (then `on_change` is called once).
/// A stream quiet for 30 s is re-established without counting as a break. Own thread; the
/// destructor stops and joins it. Status() is thread-safe.
class EtcdKeyWatch : public LockWatch {
 public:
  EtcdKeyWatch(std::vector<std::string> endpoints, std::string key, Changed on_change);
  ~EtcdKeyWatch() override;
  EtcdKeyWatch(const EtcdKeyWatch&) = delete;
  EtcdKeyWatch& operator=(const EtcdKeyWatch&) = delete;
  LockWatchStatus Status() const override;

 private:
  enum class StreamEnd { kStopped, kQuiet, kBroken, kFailed };
  void Run();
  /// Follows one stream from `endpoint` until it ends.
  StreamEnd Follow(const std::string& endpoint);
  /// Handles one message; false when the stream must be dropped.
  bool Handle(const EtcdWatchMessage& message);
  /// Waits `delay` unless stopped; false when stopped.
  bool Pause(std::chrono::milliseconds delay);

  const std::vector<std::string> endpoints_;
  const std::string key_;
  const Changed on_change_;
  // The watch thread's own: the last value seen ("" after a delete), the last revision.
  std::optional<std::string> last_value_;
  std::int64_t revision_ = 0;
  std::atomic<bool> up_{false};
  std::atomic<std::uint64_t> breaks_{0};
  std::atomic<std::uint64_t> changes_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;              // guarded by mu_
  httplib::Client* client_ = nullptr;  // the stream's client, guarded by mu_ (Stop cuts it)
  std::thread thread_;                 // last: started once the rest is ready
};

}  // namespace sbd
