// repmgr's store with discovery and no member, against seeds that do not answer: the read fails
// saying which seed said what, within the deadline, and never shows the discovery password.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "probes/repmgr.h"

namespace sbd {
namespace {

// A loopback port that was free a moment ago: connections to it are refused.
int ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace

TEST_CASE("repmgr discovery: seeds that do not answer fail the read, saying which, by the deadline",
          "[repmgr][discovery]") {
  ::setenv("SBD_TEST_SEED_PASSWORD", "seed-secret", 1);
  RepmgrDiscoverySettings settings;
  settings.discovery.enabled = true;
  settings.discovery.dsn = "user=splitbrain dbname=postgres";
  settings.discovery.password_env = "SBD_TEST_SEED_PASSWORD";
  const std::string seed = "127.0.0.1:" + std::to_string(ClosedPort());
  settings.seeds = {seed};
  RepmgrStore store({}, "repmgr", Millis(300), EventLoop::Shared(), settings);
  const auto began = SteadyClock::now();
  auto record = store.Read(began + std::chrono::milliseconds(700));
  CHECK(SteadyClock::now() - began < std::chrono::milliseconds(1500));
  REQUIRE(std::holds_alternative<ProbeFailure>(record));
  const std::string& message = std::get<ProbeFailure>(record).message;
  INFO(message);
  CHECK(message.find("discovery found no node in the seeds' copies of repmgr's record; seed " +
                     seed + ": connect: ") == 0);
  CHECK(message.find("seed-secret") == std::string::npos);
  // Discovery off, no member: nothing to read, as before.
  RepmgrStore plain({}, "repmgr", Millis(300));
  auto none = plain.Read(SteadyClock::now() + std::chrono::milliseconds(700));
  REQUIRE(std::holds_alternative<ProbeFailure>(none));
  CHECK(std::get<ProbeFailure>(none).message == "no member to read repmgr from");
}

}  // namespace sbd
