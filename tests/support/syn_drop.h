// A loopback address whose SYNs go unanswered, as to a firewalled or powered-off host: a
// listener with a backlog of 0 that never accepts, its one-slot accept queue filled by a
// connection of its own, so that Linux drops every later SYN (net.ipv4.tcp_abort_on_overflow
// = 0, the default) and a connect to it stays in SYN-SENT until the client gives up. Unlike a
// listener that merely never answers (the kernel completes that handshake), nothing here ever
// completes a connection. Header-only; construct and destroy on one thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace sbd::testing {

class SynDropListener {
 public:
  SynDropListener() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listener_, 0) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("syn-drop listener: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    // The filler: completed by the kernel into the one free slot, never accepted.
    filler_ = socket(AF_INET, SOCK_STREAM, 0);
    if (filler_ < 0 || connect(filler_, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
      throw std::runtime_error("syn-drop listener: cannot fill the accept queue");
    }
  }
  ~SynDropListener() {
    close(filler_);
    close(listener_);
  }
  SynDropListener(const SynDropListener&) = delete;
  SynDropListener& operator=(const SynDropListener&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int listener_ = -1;
  int filler_ = -1;
  int port_ = 0;
};

}  // namespace sbd::testing
