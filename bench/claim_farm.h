// The bench's claim endpoints at scale: one libuv server on its own thread standing for
// thousands of candidates' /metrics endpoints (issue 25's 10,000 claim members). GET
// /<lock>/<member> answers, on a kept-alive connection, the exposition a candidate that does not
// hold <lock> serves: `leader_election_master_status{name="<lock>",token="1"} 0`. Not a
// detector component: a load source, so the benchmark measures the detector, not 10,000
// processes.
#pragma once

#include <uv.h>

#include <atomic>
#include <cstdint>
#include <thread>

namespace sbd::bench {

class ClaimFarm {
 public:
  struct Connection;  ///< one kept-alive client connection

  /// Listens on a free loopback port; throws std::runtime_error when it cannot.
  ClaimFarm();
  ~ClaimFarm();
  ClaimFarm(const ClaimFarm&) = delete;
  ClaimFarm& operator=(const ClaimFarm&) = delete;

  int port() const { return port_; }
  /// Requests answered, and connections accepted, so far.
  std::uint64_t requests() const { return requests_; }
  std::uint64_t connections() const { return connections_; }

 private:
  static void OnConnection(uv_stream_t* server, int status);
  static void OnRead(uv_stream_t* stream, ssize_t n, const uv_buf_t* buf);

  uv_loop_t loop_{};
  uv_tcp_t server_{};
  uv_async_t stop_{};
  int port_ = 0;
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> connections_{0};
  std::thread thread_;
};

}  // namespace sbd::bench
