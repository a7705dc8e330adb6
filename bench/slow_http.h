// Loopback HTTP endpoints that never finish an answer, for the hostile benchmark parts: one
// that trickles its headers (part hostile) and one that accepts and never answers, as a frozen
// agent's REST API does (part frozen-rest). One thread, poll(); every connection is held until
// the client closes it.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace sbd::bench {

class SlowHttpServer {
 public:
  enum class Mode {
    /// A status line at once, then one byte of a header line every half second, never ending
    /// the headers.
    kTrickleHeaders,
    /// Accepts, reads the request and drops it, never writes a byte.
    kSilent,
  };
  /// Listens on a free loopback port; throws std::runtime_error when it cannot.
  explicit SlowHttpServer(Mode mode);
  ~SlowHttpServer();
  SlowHttpServer(const SlowHttpServer&) = delete;
  SlowHttpServer& operator=(const SlowHttpServer&) = delete;

  int port() const { return port_; }
  /// Connections accepted so far.
  long accepted() const { return accepted_; }
  /// Connections open now.
  long open() const { return open_; }

 private:
  struct Conn {
    int fd;
    std::chrono::steady_clock::time_point next;
  };
  void Run();

  const Mode mode_;
  int listener_ = -1;
  int port_ = 0;
  std::vector<Conn> conns_;
  std::atomic<bool> stop_{false};
  std::atomic<long> accepted_{0};
  std::atomic<long> open_{0};
  std::thread thread_;
};

}  // namespace sbd::bench
