// RedisLeaseStore (the redis_lease kind's lock store) on a real redis-server: the record read
// by a read-only ACL user with its password from a file, and what a missing or wrong password
// gives.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "probes/lease_adapters.h"
#include "tests/support/detector_process.h"
#include "tests/support/lease_sandbox.h"

namespace {

using sbd::SteadyClock;
using std::chrono::milliseconds;

sbd::ClusterSpec LeaseCluster(int port) {
  sbd::ClusterSpec spec;
  spec.name = "orders";
  spec.kind = "redis_lease";
  spec.redis_lease.address = "127.0.0.1:" + std::to_string(port);
  spec.redis_lease.key = "lease:orders";
  spec.redis_lease.lock = "orders";
  sbd::MemberSpec worker;
  worker.name = "worker-b";
  worker.lease_identity = "w-b";
  spec.members = {worker};
  return spec;
}

std::variant<sbd::LockRecord, sbd::ProbeFailure> ReadOnce(sbd::RedisLeaseStore& store) {
  return store.Read(SteadyClock::now() + milliseconds(2000));
}

}  // namespace

TEST_CASE("RedisLeaseStore: a read-only ACL user with a password file reads the key's holder",
          "[lease][redis]") {
  sbd::testing::RedisServer redis("s3cret-pass", "splitbrain");
  REQUIRE(redis.Command({"SET", "lease:orders", "w-b", "PX", "5000"}) == "OK");
  sbd::testing::TempDir dir("sbd-lease-store");
  sbd::ClusterSpec spec = LeaseCluster(redis.port());
  spec.redis_lease.username = "splitbrain";
  spec.redis_lease.password_file = sbd::testing::WriteFile(dir.path(), "pass", "s3cret-pass\n");
  sbd::RedisLeaseStore store(spec);
  auto read = ReadOnce(store);
  REQUIRE(std::holds_alternative<sbd::LockRecord>(read));
  const sbd::LockRecord& view = std::get<sbd::LockRecord>(read);
  CHECK(view.holder_token == "w-b");
  CHECK(view.holder == "worker-b");  // its configured identity
  CHECK(view.lease_ttl_remaining >= 1);
  CHECK(view.lease_ttl_remaining <= 5);
  CHECK(view.rejected.empty());

  // The key gone: nobody holds it, and the store says so without failing.
  REQUIRE(redis.Command({"DEL", "lease:orders"}) == "(integer) 1");
  read = ReadOnce(store);
  REQUIRE(std::holds_alternative<sbd::LockRecord>(read));
  CHECK(std::get<sbd::LockRecord>(read).holder.empty());
  CHECK(std::get<sbd::LockRecord>(read).holder_token.empty());
}

TEST_CASE("RedisLeaseStore: an unset password variable and a wrong password name no secret",
          "[lease][redis]") {
  sbd::testing::RedisServer redis("s3cret-pass");
  sbd::ClusterSpec spec = LeaseCluster(redis.port());
  spec.redis_lease.password_env = "SBD_TEST_LEASE_PASSWORD_UNSET";
  unsetenv("SBD_TEST_LEASE_PASSWORD_UNSET");
  sbd::RedisLeaseStore unset(spec);
  auto read = ReadOnce(unset);
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(read));
  CHECK(std::get<sbd::ProbeFailure>(read).reason == sbd::ProbeFailureReason::kConfig);

  spec.redis_lease.password_env = "SBD_TEST_LEASE_PASSWORD";
  setenv("SBD_TEST_LEASE_PASSWORD", "wrong-guess", 1);
  sbd::RedisLeaseStore wrong(spec);
  read = ReadOnce(wrong);
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(read));
  const sbd::ProbeFailure& failure = std::get<sbd::ProbeFailure>(read);
  CHECK(failure.reason == sbd::ProbeFailureReason::kAuth);
  CHECK(failure.message.find("wrong-guess") == std::string::npos);

  // Fixed in the environment, the next read logs in again.
  setenv("SBD_TEST_LEASE_PASSWORD", "s3cret-pass", 1);
  read = ReadOnce(wrong);
  CHECK(std::holds_alternative<sbd::LockRecord>(read));
  unsetenv("SBD_TEST_LEASE_PASSWORD");
}

TEST_CASE("RedisLeaseStore: a pattern is scanned on the event loop, and its key cap is said",
          "[lease][redis]") {
  sbd::testing::RedisServer redis;
  REQUIRE(redis.Command({"SET", "locks:orders", "w-b", "PX", "5000"}) == "OK");
  for (int i = 0; i < 30; ++i) {
    REQUIRE(redis.Command({"SET", "other:" + std::to_string(i), "x"}) == "OK");
  }
  sbd::ClusterSpec spec = LeaseCluster(redis.port());
  spec.redis_lease.key.clear();
  spec.redis_lease.pattern = "locks:*";
  sbd::RedisLeaseStore store(spec);
  auto read = ReadOnce(store);
  REQUIRE(std::holds_alternative<sbd::LockRecord>(read));
  CHECK(std::get<sbd::LockRecord>(read).holder == "worker-b");
  CHECK(std::get<sbd::LockRecord>(read).rejected.empty());

  // Two held keys past a cap of one: the cap is reported, and the read still answers.
  REQUIRE(redis.Command({"SET", "locks:orders-2", "w-c", "PX", "5000"}) == "OK");
  spec.redis_lease.max_keys = 1;
  sbd::RedisLeaseStore capped(spec);
  read = ReadOnce(capped);
  REQUIRE(std::holds_alternative<sbd::LockRecord>(read));
  const auto& rejected = std::get<sbd::LockRecord>(read).rejected;
  INFO(rejected.size());
  bool said = false;
  for (const auto& why : rejected) said = said || why.find("max_keys 1") != std::string::npos;
  CHECK(said);
}
