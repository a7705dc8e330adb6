// The Redis lease record read from a real redis-server 7 on loopback (and one fake server).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "probes/redis_lease.h"
#include "tests/support/lease_sandbox.h"
#include "tests/support/on_loop.h"
#include "tests/support/process.h"

namespace {

using sbd::LeaseKeyReading;
using sbd::LeaseKeys;
using sbd::LeaseRecord;
using sbd::ProbeFailure;
using sbd::ProbeFailureReason;
using sbd::RedisEndpoint;
using LeaseReader = sbd::testing::LeaseReaderOnLoop;  // the detector's LoopLeaseReader
using sbd::SteadyClock;
using sbd::testing::RedisServer;

SteadyClock::time_point In(int millis) {
  return SteadyClock::now() + std::chrono::milliseconds(millis);
}

RedisEndpoint Local(int port) {
  RedisEndpoint endpoint;
  endpoint.port = port;
  return endpoint;
}

LeaseKeys Names(std::vector<std::string> names) {
  LeaseKeys keys;
  keys.names = std::move(names);
  return keys;
}

const LeaseRecord& Record(const std::variant<LeaseRecord, ProbeFailure>& result) {
  if (auto* failure = std::get_if<ProbeFailure>(&result)) FAIL(failure->message);
  return std::get<LeaseRecord>(result);
}

}  // namespace

TEST_CASE("LoopLeaseReader: a held key gives its token and lease left; a missing one is gone") {
  RedisServer redis;
  REQUIRE(redis.Command({"SET", "lease:a", "token-a", "PX", "5000"}) == "OK");
  LeaseReader reader(Local(redis.port()), Names({"lease:a", "lease:none"}));
  auto result = reader.Read(In(2000));
  const auto& record = Record(result);
  REQUIRE(record.keys.size() == 2);
  const auto& held = record.keys[0];
  CHECK(held.state == LeaseKeyReading::State::kHeld);
  CHECK(held.token == "token-a");
  CHECK(held.lease_left_ms > 3000);
  CHECK(held.lease_left_ms <= 5000);
  CHECK(held.window.sent <= held.window.received);
  CHECK(record.keys[1].state == LeaseKeyReading::State::kGone);
  CHECK(record.keys[1].lease_left_ms == -2);
  // The kept connection serves the next read too.
  REQUIRE(redis.Command({"SET", "lease:a", "token-b", "PX", "5000"}) == "OK");
  auto again = reader.Read(In(2000));
  CHECK(Record(again).keys[0].token == "token-b");
}

TEST_CASE("LoopLeaseReader: a PTTL above 2^53 ms fails the read naming the range, never wraps") {
  // Redis 7 takes a PX this large (it fits once added to the clock); (ms + 999) / 1000 on a
  // PTTL near INT64_MAX would wrap.
  RedisServer redis;
  REQUIRE(redis.Command({"SET", "lease:far", "token-a", "PX", "9000000000000000000"}) == "OK");
  LeaseReader reader(Local(redis.port()), Names({"lease:far"}));
  auto result = reader.Read(In(2000));
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  const ProbeFailure& failure = std::get<ProbeFailure>(result);
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(failure.message.find("is out of range -2..9007199254740992") != std::string::npos);
  REQUIRE(redis.Command({"SET", "lease:far", "token-a", "PX", "5000"}) == "OK");
  CHECK(Record(reader.Read(In(2000))).keys[0].lease_left_ms <= 5000);
}

TEST_CASE("LoopLeaseReader: a lease without TTL, a binary token and a hash are each said so") {
  RedisServer redis;
  REQUIRE(redis.Command({"SET", "lease:forever", "t"}) == "OK");
  REQUIRE(redis.Command({"SET", "lease:bin", std::string("a\xff\n\0b", 5), "PX", "5000"}) == "OK");
  REQUIRE(redis.Command({"HSET", "lease:hash", "holder", "x"}) == "(integer) 1");
  LeaseReader reader(Local(redis.port()), Names({"lease:forever", "lease:bin", "lease:hash"}));
  auto result = reader.Read(In(2000));
  const auto& record = Record(result);
  REQUIRE(record.keys.size() == 3);
  CHECK(record.keys[0].NoTtl());
  CHECK(record.keys[0].lease_left_ms == -1);
  CHECK(record.keys[1].token == std::string("a\xff\n\0b", 5));
  CHECK(record.keys[1].TokenShown() == "a\\xFF\\n\\x00b");
  CHECK(record.keys[2].state == LeaseKeyReading::State::kWrongType);
  CHECK(record.keys[2].type == "hash");
}

TEST_CASE("LoopLeaseReader: a huge value is cut at the cap and flagged, with its length") {
  RedisServer redis;
  REQUIRE(redis.Command({"SET", "lease:big", std::string(100000, 'x'), "PX", "5000"}) == "OK");
  LeaseKeys keys = Names({"lease:big"});
  keys.max_token_bytes = 64;
  LeaseReader reader(Local(redis.port()), keys);
  auto result = reader.Read(In(2000));
  const auto& key = Record(result).keys.at(0);
  CHECK(key.token == std::string(64, 'x'));
  CHECK(key.token_truncated);
  CHECK(key.token_length == 100000);
}

TEST_CASE("LoopLeaseReader: a pattern is scanned within its caps, and a hit cap is reported") {
  RedisServer redis;
  for (int i = 0; i < 30; ++i) {
    REQUIRE(redis.Command({"SET", "locks:" + std::to_string(i), "t" + std::to_string(i), "PX",
                           "9000"}) == "OK");
  }
  REQUIRE(redis.Command({"SET", "other", "x"}) == "OK");
  LeaseKeys keys;
  keys.pattern = "locks:*";
  {
    LeaseReader reader(Local(redis.port()), keys);
    auto result = reader.Read(In(2000));
    const auto& record = Record(result);
    CHECK(record.keys.size() == 30);
    CHECK(record.scan_limit_hit.empty());
  }
  keys.max_keys = 10;
  LeaseReader capped(Local(redis.port()), keys);
  auto result = capped.Read(In(2000));
  CHECK(Record(result).keys.size() == 10);
  CHECK(Record(result).scan_limit_hit == "max_keys 10");
}

TEST_CASE("LoopLeaseReader: nothing listening is refused") {
  LeaseReader reader(Local(sbd::testing::FreeLoopbackPort()), Names({"k"}));
  auto result = reader.Read(In(2000));
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  CHECK(std::get<ProbeFailure>(result).reason == ProbeFailureReason::kRefused);
}

TEST_CASE("LoopLeaseReader: a frozen server is a timeout at the deadline") {
  RedisServer redis;
  LeaseReader reader(Local(redis.port()), Names({"k"}));
  redis.Freeze();
  const auto started = SteadyClock::now();
  auto result = reader.Read(In(300));
  const auto took = SteadyClock::now() - started;
  redis.Resume();
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  CHECK(std::get<ProbeFailure>(result).reason == ProbeFailureReason::kTimeout);
  CHECK(took < std::chrono::milliseconds(800));
  // Resumed, the next read reconnects and works.
  CHECK(std::holds_alternative<LeaseRecord>(reader.Read(In(2000))));
}

TEST_CASE("LoopLeaseReader: a server trickling its answer past the deadline is a timeout") {
  // A fake Redis that accepts, then sends a bulk reply one byte every 50 ms.
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(listen(listener, 4) == 0);
  socklen_t length = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &length);
  std::thread trickle([listener] {
    const int client = accept(listener, nullptr, nullptr);
    const std::string reply = "+string\r\n$100\r\n" + std::string(100, 'x');
    for (char c : reply) {
      if (send(client, &c, 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the server's pace
    }
    close(client);
  });
  LeaseReader reader(Local(ntohs(addr.sin_port)), Names({"k"}));
  const auto started = SteadyClock::now();
  auto result = reader.Read(In(400));
  const auto took = SteadyClock::now() - started;
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  CHECK(std::get<ProbeFailure>(result).reason == ProbeFailureReason::kTimeout);
  CHECK(took < std::chrono::milliseconds(900));
  trickle.join();
  close(listener);
}

TEST_CASE("LoopLeaseReader: a wrong password is an auth failure that names no secret") {
  RedisServer redis("s3cret", "reader");
  RedisEndpoint endpoint = Local(redis.port());
  endpoint.password = "not-the-password";
  LeaseReader wrong(endpoint, Names({"k"}));
  auto result = wrong.Read(In(2000));
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  CHECK(std::get<ProbeFailure>(result).reason == ProbeFailureReason::kAuth);
  CHECK(std::get<ProbeFailure>(result).message.find("not-the-password") == std::string::npos);
  LeaseReader none(Local(redis.port()), Names({"k"}));
  auto unauthenticated = none.Read(In(2000));
  REQUIRE(std::holds_alternative<ProbeFailure>(unauthenticated));
  CHECK(std::get<ProbeFailure>(unauthenticated).reason == ProbeFailureReason::kAuth);
}

TEST_CASE("LoopLeaseReader: a read-only ACL user reads the lease, with SCAN too") {
  RedisServer redis("s3cret", "reader");
  REQUIRE(redis.Command({"SET", "lease:a", "token-a", "PX", "5000"}) == "OK");
  RedisEndpoint endpoint = Local(redis.port());
  endpoint.user = "reader";
  endpoint.password = "s3cret";
  LeaseKeys keys;
  keys.pattern = "lease:*";
  LeaseReader reader(endpoint, keys);
  auto result = reader.Read(In(2000));
  REQUIRE(Record(result).keys.size() == 1);
  CHECK(Record(result).keys[0].token == "token-a");
}
