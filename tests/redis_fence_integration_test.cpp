// The Redis fence (detector/remediation/redis_fence) against real redis-server 7 processes
// (tests/support/redis_sandbox) and hostile endpoints (tests/support/hostile_resp): the write
// guard set, proved and undone; a replica left alone; refusals, a wrong password, a silent
// listener, a frozen server and replies of the wrong shape all "failed", bounded, no crash.
#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "detector/remediation/redis_fence.h"
#include "tests/support/files.h"
#include "tests/support/hostile_resp.h"
#include "tests/support/process.h"
#include "tests/support/redis_sandbox.h"

namespace sbd {
namespace {

using testing::HostileResp;
using testing::RedisProcess;
using testing::RedisSandbox;
using testing::RespHostility;
using testing::RunCommand;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// redis-cli from a fresh process, its output whatever the exit code (an error reply may exit 1).
std::string Cli(const RedisProcess& server, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"redis-cli", "-h", "127.0.0.1", "-p",
                                   std::to_string(server.port())};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::Trim(RunCommand(argv, false, std::chrono::seconds(10)).output);
}

// The value of `name` from CONFIG GET, as redis-cli prints it ("name\nvalue").
std::string ConfigValue(const RedisProcess& server, const std::string& name) {
  const std::string out = Cli(server, {"CONFIG", "GET", name});
  const size_t newline = out.find('\n');
  return newline == std::string::npos ? "" : out.substr(newline + 1);
}

// A field of INFO replication ("connected_slaves"), "" when absent.
std::string ReplicationField(const RedisProcess& server, const std::string& field) {
  std::istringstream in(Cli(server, {"INFO", "replication"}));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 1);
  }
  return "";
}

// The undo the detail carries, as redis-cli arguments.
std::vector<std::string> UndoOf(const std::string& detail) {
  const size_t at = detail.find("undo: ");
  REQUIRE(at != std::string::npos);
  std::istringstream in(detail.substr(at + 6));
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

RedisFenceTarget TargetAt(const std::string& address, milliseconds timeout = milliseconds(3000)) {
  RedisFenceTarget target;
  target.address = address;
  target.timeout = timeout;
  return target;
}

// Fences `master` (one replica, `replica`) and checks the guard, the replica and the undo.
void FenceAndUndo(const RedisProcess& master, const RedisProcess& replica,
                  const std::string& expected_undo) {
  const FenceOutcome outcome = FenceRedis(TargetAt(master.address()));
  INFO(outcome.detail);
  REQUIRE(outcome.result == "fenced");
  CHECK(outcome.verified);
  CHECK(outcome.detail.find("undo: " + expected_undo) != std::string::npos);
  CHECK(ConfigValue(master, "min-replicas-to-write") == "1000000");
  CHECK(ConfigValue(master, "min-replicas-max-lag") != "0");
  CHECK(Cli(master, {"SET", "after", "fence"}).find("NOREPLICAS") != std::string::npos);
  CHECK(Cli(master, {"GET", "before"}) == "kept");  // reads still served
  CHECK(ReplicationField(master, "connected_slaves") == "1");
  CHECK(Cli(replica, {"GET", "before"}) == "kept");
  CHECK(Cli(replica, {"EXISTS", "after"}) == "0");

  CHECK(Cli(master, UndoOf(outcome.detail)) == "OK");
  CHECK(Cli(master, {"SET", "after", "undo"}) == "OK");
}

}  // namespace

TEST_CASE("redis fence: behaviour", "[fence]") {
  SECTION("a master with a replica: fenced, proved, the replica kept, undone") {
    RedisSandbox sandbox;
    RedisProcess& master = sandbox.StartServer("m");
    RedisProcess& replica = sandbox.StartServer("r1", &master);
    REQUIRE(Cli(master, {"SET", "before", "kept"}) == "OK");
    REQUIRE(testing::WaitFor(
        [&] {
          return Cli(replica, {"GET", "before"}) == "kept";
        },
        std::chrono::seconds(10)));
    FenceAndUndo(master, replica, "CONFIG SET min-replicas-to-write 0 min-replicas-max-lag 10");
    CHECK(ConfigValue(master, "min-replicas-to-write") == "0");
    CHECK(ConfigValue(master, "min-replicas-max-lag") == "10");
  }

  SECTION("a guard switched off by max-lag 0: raised to 10, the old values restored") {
    RedisSandbox sandbox;
    RedisProcess& master = sandbox.StartServer("m");
    RedisProcess& replica = sandbox.StartServer("r1", &master);
    REQUIRE(Cli(master, {"CONFIG", "SET", "min-replicas-to-write", "3"}) == "OK");
    REQUIRE(Cli(master, {"CONFIG", "SET", "min-replicas-max-lag", "0"}) == "OK");
    REQUIRE(Cli(master, {"SET", "before", "kept"}) == "OK");
    REQUIRE(testing::WaitFor(
        [&] {
          return Cli(replica, {"GET", "before"}) == "kept";
        },
        std::chrono::seconds(10)));
    FenceAndUndo(master, replica, "CONFIG SET min-replicas-to-write 3 min-replicas-max-lag 0");
    CHECK(ConfigValue(master, "min-replicas-to-write") == "3");
    CHECK(ConfigValue(master, "min-replicas-max-lag") == "0");
  }

  SECTION("fenced twice: the second says so, the first's undo lifts the fence") {
    RedisSandbox sandbox;
    RedisProcess& master = sandbox.StartServer("m");
    const FenceOutcome first = FenceRedis(TargetAt(master.address()));
    const FenceOutcome second = FenceRedis(TargetAt(master.address()));
    INFO(first.detail << "\n" << second.detail);
    REQUIRE(first.result == "fenced");
    REQUIRE(second.result == "fenced");
    CHECK(second.detail.find("already at the fence's value") != std::string::npos);
    CHECK(UndoOf(second.detail) == std::vector<std::string>{"CONFIG", "SET",
                                                            "min-replicas-to-write", "1000000",
                                                            "min-replicas-max-lag", "10"});
    CHECK(Cli(master, UndoOf(first.detail)) == "OK");
    CHECK(Cli(master, {"SET", "after", "undo"}) == "OK");
  }

  SECTION("a replica: not_primary, nothing changed") {
    RedisSandbox sandbox;
    RedisProcess& master = sandbox.StartServer("m");
    RedisProcess& replica = sandbox.StartServer("r1", &master);
    const FenceOutcome outcome = FenceRedis(TargetAt(replica.address()));
    INFO(outcome.detail);
    CHECK(outcome.result == "not_primary");
    CHECK_FALSE(outcome.verified);
    CHECK(ConfigValue(replica, "min-replicas-to-write") == "0");
    CHECK(ConfigValue(replica, "min-replicas-max-lag") == "10");
    CHECK(ConfigValue(master, "min-replicas-to-write") == "0");
  }

  SECTION("an ACL user without +config: failed with the refusal, the guard not set") {
    RedisSandbox sandbox;
    RedisProcess& master = sandbox.StartServer("m");
    REQUIRE(Cli(master, {"ACL", "SETUSER", "weak", "on", ">weak-secret-7", "~*", "+@all",
                         "-config"}) == "OK");
    RedisFenceTarget target = TargetAt(master.address());
    target.username = "weak";
    target.password = "weak-secret-7";
    const FenceOutcome outcome = FenceRedis(target);
    INFO(outcome.detail);
    CHECK(outcome.result == "failed");
    CHECK_FALSE(outcome.verified);
    CHECK(outcome.detail.find("refused: NOPERM") != std::string::npos);
    CHECK(outcome.detail.find("weak-secret-7") == std::string::npos);
    CHECK(ConfigValue(master, "min-replicas-to-write") == "0");
    CHECK(Cli(master, {"SET", "still", "writable"}) == "OK");
  }

  SECTION("a wrong password: failed, the password in no detail") {
    RedisSandbox sandbox;
    RedisProcess& master = sandbox.StartServer("m");
    REQUIRE(Cli(master, {"ACL", "SETUSER", "fencer", "on", ">right-secret-1", "~*", "+@all"}) ==
            "OK");
    for (const std::string user : {"fencer", ""}) {
      RedisFenceTarget target = TargetAt(master.address());
      target.username = user;
      target.password = "wrong-secret-42";
      const FenceOutcome outcome = FenceRedis(target);
      INFO(user << ": " << outcome.detail);
      CHECK(outcome.result == "failed");
      CHECK(outcome.detail.find("AUTH refused") != std::string::npos);
      CHECK(outcome.detail.find("wrong-secret-42") == std::string::npos);
    }
    CHECK(ConfigValue(master, "min-replicas-to-write") == "0");
  }

  SECTION("a listener that never answers: failed within the bound") {
    HostileResp silent(RespHostility::kSilent);
    const auto start = Clock::now();
    const FenceOutcome outcome = FenceRedis(TargetAt(silent.address(), milliseconds(500)));
    const auto elapsed = Clock::now() - start;
    INFO(outcome.detail);
    CHECK(outcome.result == "failed");
    CHECK(elapsed < std::chrono::seconds(3));
    CHECK(silent.accepted() == 1);
  }

  SECTION("a frozen redis (SIGSTOP): failed within the bound, nothing changed") {
    RedisSandbox sandbox;
    RedisProcess& master = sandbox.StartServer("m");
    master.Freeze();
    const auto start = Clock::now();
    const FenceOutcome outcome = FenceRedis(TargetAt(master.address(), milliseconds(500)));
    const auto elapsed = Clock::now() - start;
    master.Resume();
    INFO(outcome.detail);
    CHECK(outcome.result == "failed");
    CHECK(elapsed < std::chrono::seconds(3));
    CHECK(ConfigValue(master, "min-replicas-to-write") == "0");
  }

  SECTION("hostile replies: failed, no crash") {
    const std::vector<std::string> answers = {
        ":1\r\n",                               // ROLE as an integer
        "garbage\r\n",                          // not RESP at all
        "$5\r\nmaster\r\n",                     // a bulk string, and too long for its length
        "*0\r\n",                               // ROLE with no role
        "*1\r\n:5\r\n",                         // the role an integer
        "*1\r\n$-1\r\n",                        // the role nil
        "*1\r\n*1\r\n$6\r\nmaster\r\n",         // the role nested
        "*1\r\n$6\r\nmaster\r\n",               // a master whose CONFIG GET has one element
        "*2\r\n$6\r\nmaster\r\n:7\r\n",         // ... an integer value
        "*2\r\n$6\r\nmaster\r\n$3\r\nabc\r\n",  // ... a value that is not a count
        "*2\r\n$6\r\nmaster\r\n$2\r\n10\r\n",   // ... then CONFIG SET gets an array
        "+OK\r\n",                              // a status for everything
        "-ERR no\r\n",                          // an error for everything
    };
    for (const std::string& answer : answers) {
      HostileResp hostile(RespHostility::kAnswer, 1, answer);
      const FenceOutcome outcome = FenceRedis(TargetAt(hostile.address(), milliseconds(500)));
      INFO(answer << " -> " << outcome.detail);
      CHECK(outcome.result == "failed");
      CHECK_FALSE(outcome.verified);
    }
  }

  SECTION("TLS to a plain server: failed at connect within the bound, nothing changed") {
    // (A TLS server fenced over TLS: redis_tls_integration_test.cpp.)
    RedisSandbox sandbox;
    RedisProcess& plain = sandbox.StartServer("m");
    RedisFenceTarget target = TargetAt(plain.address(), milliseconds(500));
    target.tls = RedisTlsSpec{};
    const auto started = std::chrono::steady_clock::now();
    const FenceOutcome outcome = FenceRedis(target);
    INFO(outcome.detail);
    CHECK(outcome.result == "failed");
    CHECK(outcome.detail.find(": connect: ") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(2));
    CHECK(ConfigValue(plain, "min-replicas-to-write") == "0");
  }
}

TEST_CASE("redis fence: the undo", "[fence]") {
  CHECK(RedisFenceUndo("0", "10") == "CONFIG SET min-replicas-to-write 0 min-replicas-max-lag 10");
}

}  // namespace sbd
