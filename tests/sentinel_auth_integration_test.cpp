// SentinelStore against a real redis-sentinel whose default user has a password (its
// `requirepass`) and an ACL user allowed only the two SENTINEL subcommands the store sends.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "probes/redis_wire.h"
#include "probes/sentinel.h"
#include "probes/sentinel_watch.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/redis_sandbox.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// One server under one sentinel that takes AUTH: the default user's password is d-secret,
// and `watcher` (password w-secret) may run SENTINEL master and get-master-addr-by-name only.
struct GuardedSentinel {
  testing::RedisSandbox sandbox;
  testing::RedisProcess* master = nullptr;
  std::string address;

  GuardedSentinel() {
    master = &sandbox.StartServer("m");
    sandbox.StartSentinels("guarded", *master, 1, seconds(30), seconds(60));
    const testing::RedisProcess& sentinel = *sandbox.sentinels().front();
    address = sentinel.address();
    sentinel.Cli({"ACL", "SETUSER", "watcher", "on", ">w-secret",
                  "+sentinel|get-master-addr-by-name", "+sentinel|master"});
    sentinel.Cli({"ACL", "SETUSER", "default", "resetpass", ">d-secret"});
  }

  SentinelStore Store(SentinelAuth auth) const {
    MemberSpec m;
    m.name = "m";
    m.address = master->address();
    return SentinelStore({address}, "guarded", {m}, std::move(auth));
  }
};

std::variant<DcsView, ProbeFailure> ReadOnce(SentinelStore& store) {
  return store.Read(SteadyClock::now() + milliseconds(3000));
}

// A loopback listener posing as a sentinel: every connection it accepts gets `answer` once
// its first bytes (the SUBSCRIBE) arrive, and is then held open, silent, until the end.
class HostileSentinel {
 public:
  explicit HostileSentinel(std::string answer) : answer_(std::move(answer)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(at);
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&at), len) != 0 ||
        ::listen(listener_, 8) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&at), &len) != 0) {
      throw std::runtime_error("HostileSentinel: cannot listen");
    }
    port_ = ntohs(at.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~HostileSentinel() {
    stop_ = true;
    thread_.join();
    for (int fd : held_) ::close(fd);
    ::close(listener_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int answered() const { return answered_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) continue;
      held_.push_back(fd);
      pollfd asked{fd, POLLIN, 0};
      char request[512];
      if (::poll(&asked, 1, 2000) > 0 && ::read(fd, request, sizeof(request)) > 0 &&
          ::write(fd, answer_.data(), answer_.size()) == static_cast<ssize_t>(answer_.size())) {
        ++answered_;
      }
    }
  }

  std::string answer_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> answered_{0};
  std::vector<int> held_;  // only the serving thread touches it until the join
  std::thread thread_;
};

// This process's peak virtual size (VmPeak), in KiB: an element table allocated for an
// announced count shows here even before its pages are touched.
long PeakVirtualKib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmPeak:", 0) == 0) return std::stol(line.substr(7));
  }
  return -1;
}

}  // namespace

TEST_CASE("SentinelWatch: a sentinel with a password is watched with AUTH, and its event wakes",
          "[redis][sentinel][watch]") {
  testing::RedisSandbox sandbox;
  testing::RedisProcess& master = sandbox.StartServer("m");
  sandbox.StartSentinels("guarded", master, 1, std::chrono::milliseconds(1000), seconds(60));
  const testing::RedisProcess& sentinel = *sandbox.sentinels().front();
  sentinel.Cli({"ACL", "SETUSER", "default", "resetpass", ">d-secret"});

  // Without the password the subscription is refused, and the watch says so.
  std::atomic<int> bare_changes{0};
  SentinelWatch bare({sentinel.address()}, "guarded", [&] { ++bare_changes; });
  CHECK(testing::WaitFor([&] { return bare.LastFailure().find("NOAUTH") != std::string::npos; },
                         seconds(10)));
  CHECK_FALSE(bare.Status().up);

  ::setenv("SBD_TEST_WATCH_PASS", "d-secret", 1);
  std::atomic<int> wakes{0};  // what the scheduler's Wake would count
  // Through the store, as the scheduler makes it: the watch gets the store's credentials.
  SentinelStore store({sentinel.address()}, "guarded", {},
                      SentinelAuth{"", std::nullopt, "SBD_TEST_WATCH_PASS", std::nullopt});
  std::unique_ptr<LockWatch> made = store.Watch([&] { ++wakes; });
  auto* watched = dynamic_cast<SentinelWatch*>(made.get());
  REQUIRE(watched != nullptr);
  SentinelWatch& watch = *watched;
  const bool up = testing::WaitFor([&] { return watch.Status().up; }, seconds(10));
  INFO(watch.LastFailure());
  REQUIRE(up);
  CHECK(wakes == 0);
  // Frozen, the master is subjectively down for the sentinel after down-after (1 s): +sdown.
  master.Freeze();
  CHECK(testing::WaitFor([&] { return wakes >= 1; }, seconds(10)));
  master.Resume();
  CHECK(watch.Status().changes >= 1);
  CHECK(watch.LastFailure().find("d-secret") == std::string::npos);
  CHECK(bare_changes == 0);
}

TEST_CASE("SentinelWatch: a SUBSCRIBE answered with a 100-million-element array fails on the cap",
          "[redis][sentinel][watch]") {
  HostileSentinel hostile("*100000000\r\n:1\r\n:2\r\n");
  const long before = PeakVirtualKib();
  std::atomic<int> changes{0};
  SentinelWatch watch({hostile.address()}, "guarded", [&] { ++changes; });
  const std::string cap = std::to_string(kMaxRedisArrayElements) + " array elements";
  const bool refused = testing::WaitFor(
      [&] { return watch.LastFailure().find(cap) != std::string::npos; }, seconds(10));
  INFO("last failure: " << watch.LastFailure());
  CHECK(refused);
  CHECK(watch.LastFailure().find("an array of 100000000 elements") != std::string::npos);
  CHECK(hostile.answered() >= 1);
  CHECK_FALSE(watch.Status().up);
  CHECK(changes == 0);
  // 100 million element pointers are 800 MB: none of it was ever allocated.
  CHECK(PeakVirtualKib() - before < 256 * 1024);
}

TEST_CASE("SentinelStore: sentinels with a password and an ACL user are read with AUTH",
          "[redis][sentinel]") {
  GuardedSentinel group;
  testing::TempDir dir("sbd-sentinel-auth");
  const std::string file = dir.path() + "/sentinel-pass";
  testing::WriteFile(file, "w-secret\n", 0600);

  SentinelStore acl_user = group.Store({"watcher", file, std::nullopt});
  auto read = ReadOnce(acl_user);
  if (auto* failure = std::get_if<ProbeFailure>(&read)) FAIL(failure->message);
  CHECK(std::get<DcsView>(read).holder == "m");
  CHECK(std::get<DcsView>(read).dissent.empty());

  ::setenv("SBD_TEST_SENTINEL_PASS", "d-secret", 1);
  SentinelStore default_user = group.Store({"", std::nullopt, "SBD_TEST_SENTINEL_PASS"});
  read = ReadOnce(default_user);
  if (auto* failure = std::get_if<ProbeFailure>(&read)) FAIL(failure->message);
  CHECK(std::get<DcsView>(read).holder == "m");
}

TEST_CASE(
    "SentinelStore: no, a wrong or an unset sentinel password fails as auth, naming no secret",
    "[redis][sentinel]") {
  GuardedSentinel group;
  SentinelStore bare = group.Store({});
  auto read = ReadOnce(bare);
  REQUIRE(std::holds_alternative<ProbeFailure>(read));
  CHECK(std::get<ProbeFailure>(read).reason == ProbeFailureReason::kAuth);
  CHECK(std::get<ProbeFailure>(read).message.find("NOAUTH") != std::string::npos);

  ::setenv("SBD_TEST_SENTINEL_WRONG", "not-the-secret", 1);
  SentinelStore wrong = group.Store({"watcher", std::nullopt, "SBD_TEST_SENTINEL_WRONG"});
  read = ReadOnce(wrong);
  REQUIRE(std::holds_alternative<ProbeFailure>(read));
  const ProbeFailure& refused = std::get<ProbeFailure>(read);
  CHECK(refused.reason == ProbeFailureReason::kAuth);
  CHECK(refused.message.find("not-the-secret") == std::string::npos);

  ::unsetenv("SBD_TEST_SENTINEL_UNSET");
  SentinelStore unset = group.Store({"", std::nullopt, "SBD_TEST_SENTINEL_UNSET"});
  read = ReadOnce(unset);
  REQUIRE(std::holds_alternative<ProbeFailure>(read));
  CHECK(std::get<ProbeFailure>(read).reason == ProbeFailureReason::kConfig);
  CHECK(std::get<ProbeFailure>(read).message.find("SBD_TEST_SENTINEL_UNSET is not set") !=
        std::string::npos);
}

}  // namespace sbd
