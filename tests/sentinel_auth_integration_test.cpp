// SentinelStore against a real redis-sentinel whose default user has a password (its
// `requirepass`) and an ACL user allowed only the two SENTINEL subcommands the store sends.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "probes/sentinel.h"
#include "tests/support/files.h"
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

}  // namespace

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
