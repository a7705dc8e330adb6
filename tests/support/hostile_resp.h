// Hostile Redis-speaking endpoints for tests: listeners on free loopback ports whose
// connections, once they send a command, get one misbehaving answer (a trickled bulk string, an
// array announcing more elements than the cap, silence, a reply cut by a close) or a fixed
// one. One thread serves every listener and connection with poll(). Thread-safe: construct and
// destroy on one thread.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace sbd::testing {

enum class RespHostility {
  kAnswer,        ///< `answer` (raw RESP) to each command's first bytes
  kTrickle,       ///< "$100000\r\n", then one byte per `pace`, never finished
  kHugeArray,     ///< an array announcing 2,000,000 elements, then elements as fast as taken
  kSilent,        ///< accepts, reads, never answers
  kCloseMidReply  ///< half a bulk string, then the connection closed
};

class HostileResp {
 public:
  HostileResp(RespHostility hostility, int listeners = 1, std::string answer = "+OK\r\n",
              std::chrono::milliseconds pace = std::chrono::milliseconds(500))
      : hostility_(hostility), answer_(std::move(answer)), pace_(pace) {
    for (int i = 0; i < listeners; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
      listen(fd, 64);
      socklen_t len = sizeof(addr);
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
      fcntl(fd, F_SETFL, O_NONBLOCK);
      listeners_.push_back(fd);
      ports_.push_back(ntohs(addr.sin_port));
    }
    thread_ = std::thread([this] { Serve(); });
  }
  ~HostileResp() {
    stop_ = true;
    thread_.join();
    for (int fd : listeners_) close(fd);
    for (auto& c : connections_) close(c.fd);
  }
  HostileResp(const HostileResp&) = delete;
  HostileResp& operator=(const HostileResp&) = delete;

  std::string address(size_t i = 0) const { return "127.0.0.1:" + std::to_string(ports_[i]); }
  /// Connections accepted so far.
  int accepted() const { return accepted_.load(); }

 private:
  struct Connection {
    int fd = -1;
    bool asked = false;
    std::string pending;
    std::chrono::steady_clock::time_point next_byte{};
    size_t sent = 0;
    bool close_after = false;
  };

  std::string Opening() const {
    switch (hostility_) {
      case RespHostility::kAnswer:
        return answer_;
      case RespHostility::kTrickle:
        return "$100000\r\n";
      case RespHostility::kHugeArray:
        return "*2000000\r\n";
      case RespHostility::kCloseMidReply:
        return "$10\r\nhalf";
      default:
        return "";
    }
  }

  void Accept(int listener) {
    for (;;) {
      const int fd = accept(listener, nullptr, nullptr);
      if (fd < 0) return;
      fcntl(fd, F_SETFL, O_NONBLOCK);
      Connection connection;
      connection.fd = fd;
      connections_.push_back(std::move(connection));
      ++accepted_;
    }
  }

  // False when the connection is to be closed.
  bool Step(Connection& c, std::chrono::steady_clock::time_point now) {
    char buffer[4096];
    for (;;) {
      const ssize_t got = recv(c.fd, buffer, sizeof(buffer), 0);
      if (got == 0) return false;
      if (got < 0) break;
      // kAnswer answers every read (one per command batch); the others start once.
      if (!c.asked || hostility_ == RespHostility::kAnswer) c.pending += Opening();
      if (!c.asked) {
        c.asked = true;
        c.next_byte = now + pace_;
        c.close_after = hostility_ == RespHostility::kCloseMidReply;
      }
    }
    if (!c.asked) return true;
    if (hostility_ == RespHostility::kTrickle && c.pending.empty() && now >= c.next_byte) {
      c.pending = "x";
      c.next_byte = now + pace_;
    }
    if (hostility_ == RespHostility::kHugeArray && c.pending.empty() && c.sent < (64u << 20)) {
      std::string items;
      for (int i = 0; i < 4096; ++i) items += ":1\r\n";
      c.pending = items;
    }
    while (!c.pending.empty()) {
      const ssize_t sent = send(c.fd, c.pending.data(), c.pending.size(), MSG_NOSIGNAL);
      if (sent < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
      c.pending.erase(0, static_cast<size_t>(sent));
      c.sent += static_cast<size_t>(sent);
    }
    return !c.close_after;
  }

  void Serve() {
    while (!stop_) {
      std::vector<pollfd> fds;
      for (int fd : listeners_) fds.push_back(pollfd{fd, POLLIN, 0});
      for (auto& c : connections_) {
        fds.push_back(
            pollfd{c.fd, static_cast<short>(POLLIN | (c.pending.empty() ? 0 : POLLOUT)), 0});
      }
      poll(fds.data(), fds.size(), 10);
      for (int fd : listeners_) Accept(fd);
      const auto now = std::chrono::steady_clock::now();
      for (size_t i = 0; i < connections_.size();) {
        if (Step(connections_[i], now)) {
          ++i;
          continue;
        }
        close(connections_[i].fd);
        connections_.erase(connections_.begin() + static_cast<long>(i));
      }
    }
  }

  RespHostility hostility_;
  std::string answer_;
  std::chrono::milliseconds pace_;
  std::vector<int> listeners_;
  std::vector<int> ports_;
  std::vector<Connection> connections_;  // the serving thread's only
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace sbd::testing
