// Hostile HTTP endpoints for tests: listeners on free loopback ports whose connections, once
// they send anything, get one misbehaving answer (a trickled status line or header, an endless
// header, too many headers, an oversized body, silence) or a normal one. One thread serves
// every listener and connection with poll(). Thread-safe: construct and destroy on one thread.
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

enum class Hostility {
  kNormal,         ///< a complete 200 answer with `body`
  kTrickleStatus,  ///< the status line, one byte per `pace`, never finished
  kTrickleHeader,  ///< a status line, then one header byte per `pace`, never finished
  kEndlessHeader,  ///< a status line, then one header line as fast as the socket takes it
  kManyHeaders,    ///< a status line and 10,000 short headers
  kLongStatus,     ///< a status line of 64 KiB
  kHugeBody,       ///< a 200 answer with a 64 MiB body, sent as fast as taken
  kSilent,         ///< accepts, reads, never answers
};

class HostileHttp {
 public:
  HostileHttp(Hostility hostility, int listeners = 1, std::string body = "",
              std::chrono::milliseconds pace = std::chrono::milliseconds(500))
      : hostility_(hostility), body_(std::move(body)), pace_(pace) {
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
  ~HostileHttp() {
    stop_ = true;
    thread_.join();
    for (int fd : listeners_) close(fd);
    for (auto& c : connections_) close(c.fd);
  }
  HostileHttp(const HostileHttp&) = delete;
  HostileHttp& operator=(const HostileHttp&) = delete;

  std::string url(size_t i = 0) const {
    return "http://127.0.0.1:" + std::to_string(ports_[i]) + "/metrics";
  }
  /// Connections accepted so far.
  int accepted() const { return accepted_.load(); }

 private:
  struct Connection {
    int fd = -1;
    bool asked = false;   // the request's first bytes came
    std::string pending;  // what is still to send at once
    size_t trickled = 0;  // bytes of the trickle sent
    std::chrono::steady_clock::time_point next_byte{};
    size_t endless_sent = 0;
  };

  std::string Opening() const {
    switch (hostility_) {
      case Hostility::kNormal:
        return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
               std::to_string(body_.size()) + "\r\n\r\n" + body_;
      case Hostility::kTrickleHeader:
      case Hostility::kEndlessHeader:
        return "HTTP/1.1 200 OK\r\nX-Slow: ";
      case Hostility::kManyHeaders: {
        std::string out = "HTTP/1.1 200 OK\r\n";
        for (int i = 0; i < 10000; ++i) out += "X-" + std::to_string(i) + ": v\r\n";
        return out + "Content-Length: 0\r\n\r\n";
      }
      case Hostility::kLongStatus:
        return "HTTP/1.1 200 " + std::string(64 << 10, 'O') + "\r\n\r\n";
      case Hostility::kHugeBody:
        return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";
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

  // False when the peer is gone.
  bool Step(Connection& c, std::chrono::steady_clock::time_point now) {
    char buffer[4096];
    for (;;) {
      const ssize_t got = recv(c.fd, buffer, sizeof(buffer), 0);
      if (got == 0) return false;
      if (got < 0) break;
      if (!c.asked) {
        c.asked = true;
        c.pending = Opening();
        c.next_byte = now;
      }
    }
    if (!c.asked) return true;
    const bool trickle =
        hostility_ == Hostility::kTrickleStatus || hostility_ == Hostility::kTrickleHeader;
    if (trickle && c.pending.empty() && now >= c.next_byte) {
      const std::string status = "HTTP/1.1 200 OK";
      c.pending = hostility_ == Hostility::kTrickleStatus
                      ? std::string(1, status[c.trickled % status.size()])
                      : std::string(1, 'a');
      ++c.trickled;
      c.next_byte = now + pace_;
    }
    if (c.pending.empty() && hostility_ == Hostility::kEndlessHeader) {
      c.pending = std::string(16 << 10, 'a');
    }
    if (c.pending.empty() && hostility_ == Hostility::kHugeBody && c.endless_sent < (64u << 20)) {
      c.pending = std::string(64 << 10, 'x');
    }
    while (!c.pending.empty()) {
      const ssize_t sent = send(c.fd, c.pending.data(), c.pending.size(), MSG_NOSIGNAL);
      if (sent < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
      c.pending.erase(0, static_cast<size_t>(sent));
      c.endless_sent += static_cast<size_t>(sent);
    }
    return true;
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

  Hostility hostility_;
  std::string body_;
  std::chrono::milliseconds pace_;
  std::vector<int> listeners_;
  std::vector<int> ports_;
  std::vector<Connection> connections_;  // the serving thread's only
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace sbd::testing
