// LoopRedisConnection (Redis on the event loop) against hostile Redis-speaking endpoints on
// loopback: each hostile answer fails within its deadline plus a small grace, naming the bound
// it broke, and never with the password in the text.
#include "probes/redis_loop.h"

#include <hiredis/hiredis.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "probes/event_loop.h"
#include "probes/lease_adapters.h"
#include "probes/redis_wire.h"
#include "probes/sentinel.h"
#include "tests/support/hostile_resp.h"
#include "tests/support/syn_drop.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;
using testing::HostileResp;
using testing::RespHostility;

struct Outcome {
  std::variant<std::vector<RedisValue>, ProbeFailure> result;
  milliseconds took{};
};

// Connects (with AUTH when `password` is set) and pipelines `commands` on `loop`, all under one
// deadline `budget` from now; the connection lives and dies on the loop thread. Asserts nothing,
// so any thread may call it (Catch2's assertions belong to the test's own thread).
std::future<Outcome> StartAsk(EventLoop& loop, const std::string& address,
                              std::optional<std::string> password,
                              std::vector<std::vector<std::string>> commands, milliseconds budget) {
  auto promise = std::make_shared<std::promise<Outcome>>();
  auto answer = promise->get_future();
  const auto start = SteadyClock::now();
  const auto deadline = start + budget;
  loop.Post([&loop, address, password, commands, deadline, start, promise] {
    auto connection = LoopRedisConnection::Create(loop, address, "", password, std::nullopt);
    auto finish = [start, promise, connection](auto result) mutable {
      const auto took = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start);
      promise->set_value(Outcome{std::move(result), took});
    };
    connection->Connect(deadline, [connection, commands, deadline, finish](auto failure) mutable {
      if (failure) return finish(std::variant<std::vector<RedisValue>, ProbeFailure>(*failure));
      connection->Pipeline(commands, deadline, [finish](LoopRedisConnection::Replies r) mutable {
        if (auto* f = std::get_if<ProbeFailure>(&r)) {
          return finish(std::variant<std::vector<RedisValue>, ProbeFailure>(*f));
        }
        finish(std::variant<std::vector<RedisValue>, ProbeFailure>(
            RedisValuesOf(std::get<std::vector<RedisReplyPtr>>(r))));
      });
    });
  });
  return answer;
}

// StartAsk, waited for on the test's thread.
Outcome AskOnLoop(EventLoop& loop, const std::string& address, std::optional<std::string> password,
                  std::vector<std::vector<std::string>> commands, milliseconds budget) {
  auto answer = StartAsk(loop, address, std::move(password), std::move(commands), budget);
  REQUIRE(answer.wait_for(budget + std::chrono::seconds(5)) == std::future_status::ready);
  return answer.get();
}

ProbeFailure FailureOf(const Outcome& outcome) {
  REQUIRE(std::holds_alternative<ProbeFailure>(outcome.result));
  return std::get<ProbeFailure>(outcome.result);
}

const milliseconds kGrace{250};

}  // namespace

TEST_CASE("LoopRedisConnection: a trickled reply fails at the whole deadline, naming it",
          "[redis_loop][loop]") {
  // A byte every 100 ms: a per-read timeout of any length above that never fires.
  HostileResp server(RespHostility::kTrickle, 1, "", milliseconds(100));
  EventLoop loop;
  const Outcome outcome =
      AskOnLoop(loop, server.address(), std::nullopt, {{"INFO"}}, milliseconds(800));
  const ProbeFailure failure = FailureOf(outcome);
  INFO(failure.message << " after " << outcome.took.count() << " ms");
  CHECK(failure.reason == ProbeFailureReason::kTimeout);
  CHECK(failure.message.find("within the deadline of ") != std::string::npos);
  CHECK(failure.message.find("outlasted") != std::string::npos);
  CHECK(outcome.took >= milliseconds(750));
  CHECK(outcome.took <= milliseconds(800) + kGrace);
}

TEST_CASE("LoopRedisConnection: an array over the element cap is refused, naming the cap",
          "[redis_loop][loop]") {
  HostileResp server(RespHostility::kHugeArray);
  EventLoop loop;
  const Outcome outcome = AskOnLoop(loop, server.address(), std::nullopt, {{"SENTINEL", "masters"}},
                                    milliseconds(2000));
  const ProbeFailure failure = FailureOf(outcome);
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(failure.message.find("an array of 2000000 elements takes the reply over 65536 array "
                             "elements") != std::string::npos);
  CHECK(outcome.took < milliseconds(2000));
}

TEST_CASE("LoopRedisConnection: a bulk string over the byte cap fails the call, not memory",
          "[redis_loop][loop]") {
  // The whole answer is sent at once: 5 MiB of one bulk string, over the 4 MiB cap.
  HostileResp server(RespHostility::kAnswer, 1,
                     "$5242880\r\n" + std::string(5u << 20, 'x') + "\r\n");
  EventLoop loop;
  const ProbeFailure failure =
      FailureOf(AskOnLoop(loop, server.address(), std::nullopt, {{"INFO"}}, milliseconds(3000)));
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(failure.message.find("replies larger than 4194304 bytes") != std::string::npos);
}

TEST_CASE("LoopRedisConnection: a server that never answers fails at the deadline",
          "[redis_loop][loop]") {
  HostileResp server(RespHostility::kSilent);
  EventLoop loop;
  const Outcome outcome =
      AskOnLoop(loop, server.address(), std::nullopt, {{"INFO"}}, milliseconds(500));
  const ProbeFailure failure = FailureOf(outcome);
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kTimeout);
  CHECK(failure.message.find("no complete answer within the deadline of ") != std::string::npos);
  CHECK(outcome.took <= milliseconds(500) + kGrace);
}

TEST_CASE("LoopRedisConnection: an address whose SYNs are dropped fails at the deadline",
          "[redis_loop][loop]") {
  testing::SynDropListener dropped;
  EventLoop loop;
  const Outcome outcome =
      AskOnLoop(loop, dropped.address(), std::nullopt, {{"INFO"}}, milliseconds(600));
  const ProbeFailure failure = FailureOf(outcome);
  INFO(failure.message << " after " << outcome.took.count() << " ms");
  CHECK(failure.reason == ProbeFailureReason::kTimeout);
  CHECK(outcome.took >= milliseconds(550));  // no SYN-ACK ever came: nothing refused it
  CHECK(outcome.took <= milliseconds(600) + kGrace);
}

TEST_CASE("LoopRedisConnection: a server that closes mid-reply is a lost connection",
          "[redis_loop][loop]") {
  HostileResp server(RespHostility::kCloseMidReply);
  EventLoop loop;
  const ProbeFailure failure =
      FailureOf(AskOnLoop(loop, server.address(), std::nullopt, {{"INFO"}}, milliseconds(2000)));
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kConnectionLost);
  CHECK(failure.message.find("closed the connection after 9 bytes, 0 of 1 replies") !=
        std::string::npos);
}

TEST_CASE("LoopRedisConnection: a refused AUTH is an auth failure without the password",
          "[redis_loop][loop]") {
  HostileResp server(RespHostility::kAnswer, 1,
                     "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EventLoop loop;
  const ProbeFailure failure = FailureOf(AskOnLoop(
      loop, server.address(), std::string("hunter2-secret"), {{"INFO"}}, milliseconds(2000)));
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kAuth);
  CHECK(failure.message.find("AUTH refused: WRONGPASS") != std::string::npos);
  CHECK(failure.message.find("hunter2") == std::string::npos);
}

TEST_CASE("LoopRedisConnection: a closed port is refused, and a complete answer is read",
          "[redis_loop][loop]") {
  EventLoop loop;
  std::string closed;
  {
    HostileResp gone(RespHostility::kSilent);
    closed = gone.address();
  }
  const ProbeFailure refused =
      FailureOf(AskOnLoop(loop, closed, std::nullopt, {{"PING"}}, milliseconds(1000)));
  CHECK(refused.reason == ProbeFailureReason::kRefused);
  HostileResp server(RespHostility::kAnswer, 1, "*2\r\n$4\r\nPONG\r\n:7\r\n");
  const Outcome outcome =
      AskOnLoop(loop, server.address(), std::nullopt, {{"PING"}}, milliseconds(2000));
  REQUIRE(std::holds_alternative<std::vector<RedisValue>>(outcome.result));
  const auto& values = std::get<std::vector<RedisValue>>(outcome.result);
  REQUIRE(values.size() == 1);
  CHECK(values[0].items == std::vector<std::string>{"PONG", "7"});
}

TEST_CASE("LoopRedisConnection: forty trickling servers fail together and hold no thread",
          "[redis_loop][loop]") {
  HostileResp servers(RespHostility::kTrickle, 40, "", milliseconds(100));
  EventLoop loop;
  std::vector<std::future<Outcome>> asked;
  const auto start = SteadyClock::now();
  for (int i = 0; i < 40; ++i) {
    asked.push_back(StartAsk(loop, servers.address(static_cast<size_t>(i)), std::nullopt,
                             {{"INFO"}}, milliseconds(1000)));
  }
  for (auto& one : asked) {
    REQUIRE(one.wait_for(milliseconds(1000) + std::chrono::seconds(5)) ==
            std::future_status::ready);
    const ProbeFailure failure = FailureOf(one.get());
    CHECK(failure.reason == ProbeFailureReason::kTimeout);
  }
  // In parallel on one loop thread: all forty by the deadline plus grace, not forty deadlines.
  CHECK(SteadyClock::now() - start <= milliseconds(1000) + 2 * kGrace);
}

TEST_CASE(
    "SentinelStore: a sentinel sending an enormous array and one trickling fail in one deadline",
    "[redis_loop][loop]") {
  HostileResp huge(RespHostility::kHugeArray);
  HostileResp trickle(RespHostility::kTrickle, 1, "", milliseconds(100));
  // On the process's loop (the default): the store is closed there after it is gone.
  SentinelStore store({huge.address(), trickle.address()}, "cache", {}, {});
  const auto start = SteadyClock::now();
  auto read = store.Read(start + milliseconds(800));
  const auto took = SteadyClock::now() - start;
  REQUIRE(std::holds_alternative<ProbeFailure>(read));
  const ProbeFailure& failure = std::get<ProbeFailure>(read);
  INFO(failure.message);
  // Asked at once: the trickle's deadline is the whole read's, not a share after the other.
  CHECK(failure.message.find("takes the reply over 65536 array elements") != std::string::npos);
  CHECK(failure.message.find("within the deadline of") != std::string::npos);
  CHECK(took <= milliseconds(800) + kGrace);
}

TEST_CASE("RedisLeaseStore: a trickling server fails the read at its whole deadline",
          "[redis_loop][loop]") {
  HostileResp trickle(RespHostility::kTrickle, 1, "", milliseconds(100));
  ClusterSpec spec;
  spec.name = "orders";
  spec.redis_lease.address = trickle.address();
  spec.redis_lease.key = "lease:orders";
  RedisLeaseStore store(spec, EventLoop::Shared());
  const auto start = SteadyClock::now();
  auto read = store.Read(start + milliseconds(600));
  const auto took = SteadyClock::now() - start;
  REQUIRE(std::holds_alternative<ProbeFailure>(read));
  const ProbeFailure& failure = std::get<ProbeFailure>(read);
  INFO(failure.message);
  CHECK(failure.reason == ProbeFailureReason::kTimeout);
  CHECK(failure.message.find("within the deadline of") != std::string::npos);
  CHECK(took <= milliseconds(600) + kGrace);
}

}  // namespace sbd
