#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "probes/event_loop.h"
#include "probes/lock_watch.h"

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
/// gateway's streaming POST /v3/watch, on the event loop (issue 25: a LoopHttpClient in
/// streaming mode, no thread per cluster), and calls `on_change` whenever its value changes
/// (put with another value, or delete). The status and headers must come within 2 s, each
/// message (one JSON line) is capped at 1 MiB, and a stream quiet for 30 s is re-established
/// from the last revision without counting as a break. Endpoints are tried in turn; a broken
/// stream is re-established with backoff (100 ms doubling to 5 s) from the revision after the
/// last one seen, so no change is missed unless etcd compacted it (then `on_change` is called
/// once). Construct and destroy on any thread: after the destructor returns, `on_change` is never
/// called. Status() and LastFailure() are thread-safe.
class EtcdKeyWatch : public LockWatch {
 public:
  EtcdKeyWatch(std::vector<std::string> endpoints, std::string key, Changed on_change,
               EventLoop& loop = EventLoop::Shared());
  ~EtcdKeyWatch() override;
  EtcdKeyWatch(const EtcdKeyWatch&) = delete;
  EtcdKeyWatch& operator=(const EtcdKeyWatch&) = delete;
  LockWatchStatus Status() const override;
  /// Why the latest stream that failed or ended did ("<endpoint>: <reason>"), or "" while none
  /// has.
  std::string LastFailure() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace sbd
