// The cap on what a Redis server may send, against a hostile server. A real redis-server never
// sends a reply this large to the commands the probes use (INFO, SENTINEL master, GETRANGE
// cut to max_token_bytes), so this tiny in-test TCP server sends the crafted replies: it tests
// our defence, not Redis.
#include "probes/redis_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "probes/redis_lease.h"
#include "tests/support/on_loop.h"

namespace sbd {
namespace {

// Accepts one connection on a free loopback port, waits for the first command, then sends
// `head` and `filler_bytes` of 'x' (or until the client hangs up). Joins on destruction.
class HostileServer {
 public:
  HostileServer(std::string head, std::size_t filler_bytes)
      : head_(std::move(head)), filler_bytes_(filler_bytes) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    REQUIRE(bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) == 0);
    REQUIRE(listen(listener_, 1) == 0);
    REQUIRE(getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~HostileServer() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  int port() const { return port_; }
  std::size_t sent() const { return sent_; }

 private:
  // Waits up to 10 s for `fd` to be ready for `events`, or for the test to end.
  bool Ready(int fd, short events) {
    for (int waited = 0; waited < 100 && !stop_; ++waited) {
      pollfd p{fd, events, 0};
      if (poll(&p, 1, 100) > 0) return (p.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0;
    }
    return false;
  }
  void Serve() {
    if (!Ready(listener_, POLLIN)) return;
    const int fd = accept(listener_, nullptr, nullptr);
    if (fd < 0) return;
    char command[512];
    if (Ready(fd, POLLIN) && recv(fd, command, sizeof(command), 0) > 0) {
      std::string out = head_;
      const std::string chunk(64 * 1024, 'x');
      bool open = Send(fd, out);
      for (std::size_t n = 0; open && n < filler_bytes_; n += chunk.size()) open = Send(fd, chunk);
    }
    close(fd);
  }
  bool Send(int fd, const std::string& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      if (!Ready(fd, POLLOUT)) return false;
      const ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
      sent_ += static_cast<std::size_t>(n);
    }
    return true;
  }

  std::string head_;
  std::size_t filler_bytes_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> sent_{0};
  std::thread thread_;
};

SteadyClock::time_point InTenSeconds() { return SteadyClock::now() + std::chrono::seconds(10); }

ProbeFailure AskInfo(int port) {
  testing::RedisOnLoop client("127.0.0.1:" + std::to_string(port), "", std::nullopt);
  REQUIRE_FALSE(client.Connect(InTenSeconds()).has_value());
  auto replies = client.Pipeline({{"INFO", "replication"}}, InTenSeconds());
  REQUIRE(std::holds_alternative<ProbeFailure>(replies));
  return std::get<ProbeFailure>(replies);
}

}  // namespace

TEST_CASE("LoopRedisConnection: a bulk string over the cap fails the call, not memory",
          "[redis_wire]") {
  // Announces 1 GiB and streams 16 MiB: the client must stop near the 4 MiB cap.
  HostileServer server("$1073741824\r\n", 16 * 1024 * 1024);
  const ProbeFailure failure = AskInfo(server.port());
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(failure.message.find("replies larger than 4194304 bytes") != std::string::npos);
}

TEST_CASE("LoopRedisConnection: an array announcing too many elements is refused before allocation",
          "[redis_wire]") {
  HostileServer server("*2000000000\r\n:1\r\n", 0);
  const ProbeFailure failure = AskInfo(server.port());
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(failure.message.find(
            "an array of 2000000000 elements takes the reply over 65536 array elements") !=
        std::string::npos);
}

TEST_CASE("LoopRedisConnection: nested arrays count together against the element cap",
          "[redis_wire]") {
  // 40000 + 40000 elements, each table allocated on announcement: refused at the second.
  HostileServer server("*1\r\n*40000\r\n:1\r\n*40000\r\n", 0);
  const ProbeFailure failure = AskInfo(server.port());
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(failure.message.find("an array of 40000 elements takes the reply over 65536") !=
        std::string::npos);
}

TEST_CASE("LoopRedisConnection: a long array of small elements over the cap fails the call",
          "[redis_wire]") {
  // 60000 elements (under the element cap) of 100-byte strings: 6 MB on the wire.
  std::string head = "*60000\r\n";
  const std::string element = "$100\r\n" + std::string(100, 'y') + "\r\n";
  for (int i = 0; i < 60000; ++i) head += element;
  HostileServer server(head, 0);
  const ProbeFailure failure = AskInfo(server.port());
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(failure.message.find("larger than") != std::string::npos);
}

TEST_CASE("LoopLeaseReader: a huge reply to the key's commands fails the read", "[redis_wire]") {
  HostileServer server("$1073741824\r\n", 16 * 1024 * 1024);
  RedisEndpoint endpoint;
  endpoint.port = server.port();
  LeaseKeys keys;
  keys.names = {"lease:orders"};
  testing::LeaseReaderOnLoop reader(endpoint, keys);
  auto record = reader.Read(InTenSeconds());
  REQUIRE(std::holds_alternative<ProbeFailure>(record));
  const ProbeFailure& failure = std::get<ProbeFailure>(record);
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(failure.message.find("replies larger than") != std::string::npos);
}

}  // namespace sbd
