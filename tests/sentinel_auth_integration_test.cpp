// SentinelStore against a real redis-sentinel whose default user has a password (its
// `requirepass`) and an ACL user allowed only the two SENTINEL subcommands the store sends.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "probes/redis_wire.h"
#include "probes/sentinel.h"
#include "probes/sentinel_watch.h"
#include "tests/support/files.h"
#include "tests/support/hostile_resp.h"
#include "tests/support/on_loop.h"
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

std::variant<LockRecord, ProbeFailure> ReadOnce(SentinelStore& store) {
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

size_t ThreadsOfThisProcess() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    ++count;
  }
  return count;
}

// Sentinel's three subscribe confirmations for the channels the watch follows, as RESP.
std::string SubscribeConfirmations() {
  std::string out;
  int count = 0;
  for (const std::string channel : {"+switch-master", "+sdown", "+odown"}) {
    out += "*3\r\n$9\r\nsubscribe\r\n$" + std::to_string(channel.size()) + "\r\n" + channel +
           "\r\n:" + std::to_string(++count) + "\r\n";
  }
  return out;
}

// A master under one real sentinel, with a replica it can fail over to.
struct FailoverGroup {
  testing::RedisSandbox sandbox;
  testing::RedisProcess* master = nullptr;
  testing::RedisProcess* replica = nullptr;
  FailoverGroup() {
    master = &sandbox.StartServer("m");
    replica = &sandbox.StartServer("r", master);
    sandbox.StartSentinels("group", *master, 1, seconds(30), seconds(60));
  }
  const testing::RedisProcess& sentinel() const { return *sandbox.sentinels().front(); }
  // SENTINEL FAILOVER, retried while Sentinel has not seen the replica yet (NOGOODSLAVE).
  bool Failover() const {
    return testing::WaitFor(
        [&] {
          return sentinel().Cli({"SENTINEL", "FAILOVER", "group"}) == "OK";
        },
        seconds(20));
  }
};

}  // namespace

TEST_CASE("SentinelWatch: a real Sentinel's +switch-master wakes the watch within its bound",
          "[redis][sentinel][watch]") {
  FailoverGroup group;
  std::atomic<int> wakes{0};
  SentinelWatch watch({group.sentinel().address()}, "group", [&] { ++wakes; });
  const bool up = testing::WaitFor([&] { return watch.Status().up; }, seconds(10));
  INFO(watch.LastFailure());
  REQUIRE(up);
  CHECK(wakes == 0);
  REQUIRE(group.Failover());
  const auto asked = SteadyClock::now();
  // Sentinel announces +switch-master once the replica is promoted (a second or two).
  CHECK(testing::WaitFor([&] { return wakes >= 1; }, seconds(15)));
  INFO(
      "woken after " << std::chrono::duration_cast<milliseconds>(SteadyClock::now() - asked).count()
                     << " ms");
  CHECK(watch.Status().changes >= 1);
  CHECK(watch.Status().up);
  CHECK(watch.Status().breaks == 0);
}

TEST_CASE(
    "SentinelWatch: a hostile sentinel's enormous array, huge bulk string or stalled push fails "
    "its watch with the bound, and a real sentinel's watch beside it keeps working",
    "[redis][sentinel][watch][hostile]") {
  const std::string confirmations = SubscribeConfirmations();
  // After subscribing for real: an array of 100 million elements; a 5 MB bulk string; a
  // message that starts and never ends.
  testing::HostileResp huge_array(testing::RespHostility::kAnswer, 1,
                                  confirmations + "*100000000\r\n:1\r\n");
  testing::HostileResp huge_string(
      testing::RespHostility::kAnswer, 1,
      confirmations + "$5000000\r\n" + std::string(5000000, 'x') + "\r\n");
  testing::HostileResp stalled(
      testing::RespHostility::kAnswer, 1,
      confirmations + "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$40\r\ngroup 1");
  FailoverGroup group;
  std::atomic<int> hostile_changes{0};
  std::atomic<int> wakes{0};
  SentinelWatch array_watch({huge_array.address()}, "group", [&] { ++hostile_changes; });
  SentinelWatch string_watch({huge_string.address()}, "group", [&] { ++hostile_changes; });
  SentinelWatch stalled_watch({stalled.address()}, "group", [&] { ++hostile_changes; });
  SentinelWatch real({group.sentinel().address()}, "group", [&] { ++wakes; });

  const auto failed_with = [](const SentinelWatch& watch, const std::string& words) {
    return testing::WaitFor([&] { return watch.LastFailure().find(words) != std::string::npos; },
                            seconds(10));
  };
  const std::string array_cap = std::to_string(kMaxRedisArrayElements) + " array elements";
  CHECK(failed_with(array_watch, array_cap));
  INFO("array: " << array_watch.LastFailure());
  const std::string byte_cap =
      "a reply larger than " + std::to_string(kMaxRedisPipelineBytes) + " bytes";
  CHECK(failed_with(string_watch, byte_cap));
  INFO("string: " << string_watch.LastFailure());
  CHECK(failed_with(stalled_watch, "not complete within the reply bound of 2000 ms"));
  INFO("stalled: " << stalled_watch.LastFailure());
  // Each subscribed before it broke: a break, and re-established with backoff since.
  CHECK(testing::WaitFor([&] { return array_watch.Status().breaks >= 2; }, seconds(10)));
  CHECK(stalled_watch.Status().breaks >= 1);
  CHECK(hostile_changes == 0);

  REQUIRE(testing::WaitFor([&] { return real.Status().up; }, seconds(10)));
  REQUIRE(group.Failover());
  CHECK(testing::WaitFor([&] { return wakes >= 1; }, seconds(15)));
  INFO("real: " << real.LastFailure());
  CHECK(real.Status().breaks == 0);
  CHECK(real.LastFailure().empty());
}

TEST_CASE("SentinelWatch: the element cap is per push, so a long subscription never wears it out",
          "[redis][sentinel][watch]") {
  // A redis-server stands in for a sentinel (pub/sub is the same protocol, and PUBLISH puts
  // events on the channels the watch follows): more messages than the array cap in all.
  testing::RedisSandbox sandbox;
  const testing::RedisProcess& server = sandbox.StartServer("pubsub");
  std::atomic<int> wakes{0};
  SentinelWatch watch({server.address()}, "group", [&] { ++wakes; });
  REQUIRE(testing::WaitFor([&] { return watch.Status().up; }, seconds(10)));
  testing::RedisOnLoop publisher(server.address(), "", std::nullopt);
  const auto deadline = SteadyClock::now() + seconds(30);
  if (auto failure = publisher.Connect(deadline)) FAIL(failure->message);
  // Three elements a message: 32,000 messages are 96,000 elements, over the cap of 65,536.
  const int batches = kMaxRedisArrayElements / 2000;
  for (int batch = 0; batch < batches; ++batch) {
    std::vector<std::vector<std::string>> messages(
        1000, {"PUBLISH", "+switch-master", "other 127.0.0.1 1 127.0.0.1 2"});
    auto published = publisher.Pipeline(messages, deadline);
    if (auto* failure = std::get_if<ProbeFailure>(&published)) FAIL(failure->message);
  }
  auto published = publisher.Pipeline(
      {{"PUBLISH", "+switch-master", "group 127.0.0.1 1 127.0.0.1 2"}}, deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&published)) FAIL(failure->message);
  CHECK(testing::WaitFor([&] { return wakes == 1; }, seconds(10)));
  INFO(watch.LastFailure());
  CHECK(watch.Status().breaks == 0);
  CHECK(watch.Status().up);
  CHECK(watch.LastFailure().empty());
}

TEST_CASE("SentinelWatch: the number of threads does not grow with the number of watches",
          "[redis][sentinel][watch]") {
  FailoverGroup group;
  testing::HostileResp silent(testing::RespHostility::kSilent, 8);
  std::atomic<int> wakes{0};
  // One watch first, so that the event loop (and anything else started once) is running.
  auto first = std::make_unique<SentinelWatch>(std::vector<std::string>{group.sentinel().address()},
                                               "group", [&] { ++wakes; });
  REQUIRE(testing::WaitFor([&] { return first->Status().up; }, seconds(10)));
  const size_t before = ThreadsOfThisProcess();
  std::vector<std::unique_ptr<SentinelWatch>> watches;
  for (int i = 0; i < 40; ++i) {
    // Each on the real sentinel and on a silent one that never confirms the subscription.
    watches.push_back(std::make_unique<SentinelWatch>(
        std::vector<std::string>{group.sentinel().address(), silent.address(i % 8)}, "group",
        [&] { ++wakes; }));
  }
  CHECK(testing::WaitFor(
      [&] {
        return std::all_of(watches.begin(), watches.end(),
                           [](const auto& watch) { return watch->Status().up; });
      },
      seconds(20)));
  CHECK(ThreadsOfThisProcess() == before);
  CHECK(testing::WaitFor(
      [&] {
        return std::all_of(watches.begin(), watches.end(), [](const auto& watch) {
          return watch->LastFailure().find("no complete answer to the subscription") !=
                 std::string::npos;
        });
      },
      seconds(20)));
  CHECK(ThreadsOfThisProcess() == before);
  watches.clear();
  first.reset();
  CHECK(ThreadsOfThisProcess() == before);
}

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

  SentinelStore acl_user = group.Store({"watcher", file, std::nullopt, std::nullopt});
  auto read = ReadOnce(acl_user);
  if (auto* failure = std::get_if<ProbeFailure>(&read)) FAIL(failure->message);
  CHECK(std::get<LockRecord>(read).holder == "m");
  CHECK(std::get<LockRecord>(read).dissent.empty());

  ::setenv("SBD_TEST_SENTINEL_PASS", "d-secret", 1);
  SentinelStore default_user =
      group.Store({"", std::nullopt, "SBD_TEST_SENTINEL_PASS", std::nullopt});
  read = ReadOnce(default_user);
  if (auto* failure = std::get_if<ProbeFailure>(&read)) FAIL(failure->message);
  CHECK(std::get<LockRecord>(read).holder == "m");
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
  SentinelStore wrong =
      group.Store({"watcher", std::nullopt, "SBD_TEST_SENTINEL_WRONG", std::nullopt});
  read = ReadOnce(wrong);
  REQUIRE(std::holds_alternative<ProbeFailure>(read));
  const ProbeFailure& refused = std::get<ProbeFailure>(read);
  CHECK(refused.reason == ProbeFailureReason::kAuth);
  CHECK(refused.message.find("not-the-secret") == std::string::npos);

  ::unsetenv("SBD_TEST_SENTINEL_UNSET");
  SentinelStore unset = group.Store({"", std::nullopt, "SBD_TEST_SENTINEL_UNSET", std::nullopt});
  read = ReadOnce(unset);
  REQUIRE(std::holds_alternative<ProbeFailure>(read));
  CHECK(std::get<ProbeFailure>(read).reason == ProbeFailureReason::kConfig);
  CHECK(std::get<ProbeFailure>(read).message.find("SBD_TEST_SENTINEL_UNSET is not set") !=
        std::string::npos);
}

}  // namespace sbd
