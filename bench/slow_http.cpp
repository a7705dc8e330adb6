#include "bench/slow_http.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace sbd::bench {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

SlowHttpServer::SlowHttpServer(Mode mode) : mode_(mode) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(listener_, 4096) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (listener_ >= 0) ::close(listener_);
    throw std::runtime_error("slow HTTP server: cannot listen");
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Run(); });
}

SlowHttpServer::~SlowHttpServer() {
  stop_ = true;
  thread_.join();
  for (const auto& c : conns_) ::close(c.fd);
  ::close(listener_);
}

void SlowHttpServer::Run() {
  while (!stop_) {
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    for (const auto& c : conns_) fds.push_back({c.fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 50);
    for (int fd; (fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
      if (mode_ == Mode::kTrickleHeaders) {
        static const char kStatus[] = "HTTP/1.1 200 OK\r\n";
        ::send(fd, kStatus, sizeof kStatus - 1, MSG_NOSIGNAL);
      }
      conns_.push_back({fd, Clock::now() + milliseconds(500)});
      ++accepted_;
    }
    const auto now = Clock::now();
    std::vector<Conn> kept;
    for (size_t i = 0; i < conns_.size(); ++i) {
      Conn c = conns_[i];
      bool closed = false;
      if (fds.size() > i + 1 && (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) {
        char buf[4096];
        closed = ::recv(c.fd, buf, sizeof buf, 0) <= 0;  // the request is read and dropped
      }
      if (!closed && mode_ == Mode::kTrickleHeaders && now >= c.next) {
        closed = ::send(c.fd, "X", 1, MSG_NOSIGNAL) != 1;
        c.next = now + milliseconds(500);
      }
      if (closed) {
        ::close(c.fd);
      } else {
        kept.push_back(c);
      }
    }
    conns_ = std::move(kept);
    open_ = static_cast<long>(conns_.size());
  }
}

}  // namespace sbd::bench
