// The Redis TLS transport against a real redis-server 7 serving only `tls-port`, with a CA,
// a server certificate (IP 127.0.0.1, DNS localhost) and a client certificate made by the
// openssl CLI at test time: a reading over TLS with AUTH, and the clear failures (a wrong CA,
// a wrong server name, no client certificate, TLS to a plain port, plain to a TLS port), and the
// opt-in remediation's Redis fence over the same TLS.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>

#include "detector/remediation/redis_fence.h"
#include "probes/redis.h"
#include "probes/redis_wire.h"
#include "probes/sentinel_watch.h"
#include "tests/support/files.h"
#include "tests/support/on_loop.h"
#include "tests/support/process.h"
#include "tests/support/redis_sandbox.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

void Openssl(std::vector<std::string> args) {
  args.insert(args.begin(), "openssl");
  const testing::CommandResult result = testing::RunCommand(args, false, seconds(30));
  if (result.exit_code != 0) {
    throw std::runtime_error(testing::DescribeCommandRun(args, result.exit_code, result.output));
  }
}

// A P-256 key and a certificate for `subject`, signed by `ca` (self-signed when empty).
void MakeCert(const std::string& dir, const std::string& name, const std::string& subject,
              const std::string& ca, const std::string& extensions) {
  const std::string base = dir + "/" + name;
  if (ca.empty()) {
    Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", base + ".key", "-out", base + ".pem", "-days", "2", "-subj", subject});
    return;
  }
  Openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
           base + ".key", "-out", base + ".csr", "-subj", subject});
  testing::WriteFile(base + ".ext", extensions, 0600);
  Openssl({"x509", "-req", "-in", base + ".csr", "-CA", dir + "/" + ca + ".pem", "-CAkey",
           dir + "/" + ca + ".key", "-CAcreateserial", "-out", base + ".pem", "-days", "2",
           "-extfile", base + ".ext"});
}

// Certificates in a temp dir: ca (server and client), other-ca (trusted by nobody).
struct Pki {
  testing::TempDir dir{"sbd-redis-tls"};
  Pki() {
    MakeCert(dir.path(), "ca", "/CN=sbd test ca", "", "");
    MakeCert(dir.path(), "other-ca", "/CN=sbd other ca", "", "");
    MakeCert(dir.path(), "server", "/CN=localhost", "ca",
             "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
    MakeCert(dir.path(), "client", "/CN=sbd-client", "ca", "extendedKeyUsage=clientAuth\n");
  }
  std::string File(const std::string& name) const { return dir.path() + "/" + name; }
  RedisTlsSpec Client(const std::string& ca = "ca.pem") const {
    return RedisTlsSpec{File(ca), File("client.pem"), File("client.key"), ""};
  }
  std::string ServerConfig(bool auth_clients) const {
    return "tls-cert-file " + File("server.pem") + "\ntls-key-file " + File("server.key") +
           "\ntls-ca-cert-file " + File("ca.pem") + "\ntls-auth-clients " +
           (auth_clients ? "yes" : "no") + "\n";
  }
};

// Connect and ROLE, under one deadline; the replies or the failure.
std::variant<std::vector<RedisValue>, ProbeFailure> Role(testing::RedisOnLoop& client,
                                                         milliseconds budget = seconds(5)) {
  const auto deadline = SteadyClock::now() + budget;
  if (auto failure = client.Connect(deadline)) return *failure;
  return client.Pipeline({{"ROLE"}}, deadline);
}

ProbeFailure FailureOf(const std::variant<std::vector<RedisValue>, ProbeFailure>& r) {
  REQUIRE(std::holds_alternative<ProbeFailure>(r));
  return std::get<ProbeFailure>(r);
}

TEST_CASE(
    "LoopRedisConnection over TLS: ROLE and the member probe read a TLS-only server with AUTH",
    "[redis][tls]") {
  Pki pki;
  testing::RedisSandbox sandbox;
  const testing::RedisProcess& server =
      sandbox.StartTlsServer("tls", pki.ServerConfig(true) + "requirepass tls-secret\n");

  testing::RedisOnLoop client(server.address(), "", std::string("tls-secret"), pki.Client());
  auto replies = Role(client);
  if (auto* failure = std::get_if<ProbeFailure>(&replies)) FAIL(failure->message);
  const auto& values = std::get<std::vector<RedisValue>>(replies);
  REQUIRE(values.size() == 1);
  REQUIRE_FALSE(values[0].items.empty());
  CHECK(values[0].items[0] == "master");
  // The kept connection answers a second pipeline of several commands.
  replies = client.Pipeline({{"PING"}, {"ECHO", "over tls"}}, SteadyClock::now() + seconds(5));
  if (auto* failure = std::get_if<ProbeFailure>(&replies)) FAIL(failure->message);
  CHECK(std::get<std::vector<RedisValue>>(replies)[1].text == "over tls");

  // The server name checked is the configured one, here a DNS name in the certificate.
  RedisTlsSpec by_name = pki.Client();
  by_name.server_name = "localhost";
  ::setenv("SBD_TEST_REDIS_TLS_PASS", "tls-secret", 1);
  MemberSpec member;
  member.name = "tls";
  member.address = server.address();
  member.password_env = "SBD_TEST_REDIS_TLS_PASS";
  RedisProbe probe(member, "", by_name);
  const Observation obs = probe.Probe(SteadyClock::now() + seconds(5), nullptr);
  if (obs.failure() != nullptr) FAIL(obs.failure()->message);
  REQUIRE(obs.redis() != nullptr);
  CHECK(obs.redis()->role == "master");
}

TEST_CASE("LoopRedisConnection over TLS: the reply caps hold as on the plain path",
          "[redis][tls]") {
  Pki pki;
  testing::RedisSandbox sandbox;
  const testing::RedisProcess& server = sandbox.StartTlsServer("tls", pki.ServerConfig(false));
  testing::RedisOnLoop client(server.address(), "", std::nullopt, pki.Client());
  std::vector<std::string> push = {"RPUSH", "long"};
  push.resize(push.size() + kMaxRedisArrayElements + 1, "x");
  const auto deadline = SteadyClock::now() + seconds(10);
  if (auto failure = client.Connect(deadline)) FAIL(failure->message);
  auto filled =
      client.Pipeline({push, {"SET", "huge", std::string(kMaxRedisPipelineBytes, 'y')}}, deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&filled)) FAIL(failure->message);

  const ProbeFailure long_array =
      FailureOf(client.Pipeline({{"LRANGE", "long", "0", "-1"}}, SteadyClock::now() + seconds(10)));
  CHECK(long_array.reason == ProbeFailureReason::kProtocol);
  CHECK(long_array.message.find("array elements") != std::string::npos);

  // The failure closed the connection: the next call dials again.
  if (auto failure = client.Connect(SteadyClock::now() + seconds(10))) FAIL(failure->message);
  const ProbeFailure huge =
      FailureOf(client.Pipeline({{"GET", "huge"}}, SteadyClock::now() + seconds(10)));
  CHECK(huge.reason == ProbeFailureReason::kProtocol);
  CHECK(huge.message.find("replies larger than") != std::string::npos);

  auto replies = Role(client);  // and a new connection reads normally again
  if (auto* failure = std::get_if<ProbeFailure>(&replies)) FAIL(failure->message);
}

TEST_CASE("SentinelWatch over TLS: subscribes with AUTH and reports a pushed event",
          "[redis][tls][sentinel]") {
  // A TLS-only redis-server stands in for a sentinel: pub/sub is the same protocol, and
  // PUBLISH puts a +switch-master on the channel the watch follows.
  Pki pki;
  testing::RedisSandbox sandbox;
  const testing::RedisProcess& server =
      sandbox.StartTlsServer("tls", pki.ServerConfig(true) + "requirepass watch-secret\n");
  ::setenv("SBD_TEST_WATCH_TLS_PASS", "watch-secret", 1);
  std::atomic<int> changes{0};
  SentinelWatch watch(
      {server.address()}, "cache", [&] { ++changes; },
      SentinelAuth{"", std::nullopt, "SBD_TEST_WATCH_TLS_PASS", pki.Client()});
  const bool up = testing::WaitFor([&] { return watch.Status().up; }, seconds(10));
  INFO(watch.LastFailure());
  REQUIRE(up);
  testing::RedisOnLoop publisher(server.address(), "", std::string("watch-secret"), pki.Client());
  const auto deadline = SteadyClock::now() + seconds(5);
  if (auto failure = publisher.Connect(deadline)) FAIL(failure->message);
  auto published =
      publisher.Pipeline({{"PUBLISH", "+switch-master", "other 127.0.0.1 1 127.0.0.1 2"},
                          {"PUBLISH", "+switch-master", "cache 127.0.0.1 1 127.0.0.1 2"}},
                         deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&published)) FAIL(failure->message);
  CHECK(testing::WaitFor([&] { return changes == 1; }, seconds(5)));
  CHECK(watch.Status().changes == 1);  // the other group's event is not counted
  CHECK(watch.LastFailure().find("watch-secret") == std::string::npos);

  // Without the CA that signed the server, the watch never subscribes, and says why.
  SentinelWatch untrusted(
      {server.address()}, "cache", [] {},
      SentinelAuth{"", std::nullopt, "SBD_TEST_WATCH_TLS_PASS", pki.Client("other-ca.pem")});
  CHECK(testing::WaitFor(
      [&] { return untrusted.LastFailure().find("verification failed") != std::string::npos; },
      seconds(10)));
  CHECK_FALSE(untrusted.Status().up);
}

TEST_CASE(
    "LoopRedisConnection over TLS: a wrong CA or server name fails verification, naming no secret",
    "[redis][tls]") {
  Pki pki;
  testing::RedisSandbox sandbox;
  const testing::RedisProcess& server = sandbox.StartTlsServer("tls", pki.ServerConfig(false));

  testing::RedisOnLoop wrong_ca(server.address(), "", std::string("tls-secret"),
                                pki.Client("other-ca.pem"));
  const ProbeFailure untrusted = FailureOf(Role(wrong_ca));
  CHECK(untrusted.reason == ProbeFailureReason::kProtocol);
  CHECK(untrusted.message.find("verification failed") != std::string::npos);
  CHECK(untrusted.message.find("tls-secret") == std::string::npos);

  RedisTlsSpec other_name = pki.Client();
  other_name.server_name = "redis.example.org";
  testing::RedisOnLoop wrong_name(server.address(), "", std::nullopt, other_name);
  const ProbeFailure mismatch = FailureOf(Role(wrong_name));
  CHECK(mismatch.reason == ProbeFailureReason::kProtocol);
  CHECK(mismatch.message.find("verification failed for redis.example.org") != std::string::npos);

  testing::RedisOnLoop no_ca_file(server.address(), "", std::nullopt, pki.Client("missing.pem"));
  const ProbeFailure unreadable = FailureOf(Role(no_ca_file));
  CHECK(unreadable.reason == ProbeFailureReason::kConfig);
  CHECK(unreadable.message.find("tls_ca_file") != std::string::npos);
}

TEST_CASE(
    "LoopRedisConnection over TLS: a server requiring client certificates refuses a client without",
    "[redis][tls]") {
  Pki pki;
  testing::RedisSandbox sandbox;
  const testing::RedisProcess& server = sandbox.StartTlsServer("tls", pki.ServerConfig(true));
  RedisTlsSpec anonymous = pki.Client();
  anonymous.cert_file.clear();
  anonymous.key_file.clear();
  testing::RedisOnLoop client(server.address(), "", std::nullopt, anonymous);
  const ProbeFailure refused = FailureOf(Role(client));
  // TLS 1.3 finishes the client's handshake before the server checks the certificate: the
  // refusal arrives as an alert at the first read.
  CHECK(refused.reason != ProbeFailureReason::kInternal);
  CHECK_FALSE(refused.message.empty());
}

TEST_CASE("LoopRedisConnection: TLS against a plain port and plain against a TLS port fail in time",
          "[redis][tls]") {
  Pki pki;
  testing::RedisSandbox sandbox;
  const testing::RedisProcess& tls = sandbox.StartTlsServer("tls", pki.ServerConfig(false));
  const testing::RedisProcess& plain = sandbox.StartServer("plain");

  const milliseconds budget(1500);
  auto started = SteadyClock::now();
  testing::RedisOnLoop tls_to_plain(plain.address(), "", std::nullopt, pki.Client());
  const ProbeFailure handshake = FailureOf(Role(tls_to_plain, budget));
  CHECK(SteadyClock::now() - started < budget + milliseconds(500));
  CHECK(handshake.reason != ProbeFailureReason::kInternal);
  CHECK(handshake.message.find("TLS handshake") != std::string::npos);

  started = SteadyClock::now();
  testing::RedisOnLoop plain_to_tls(tls.address(), "", std::nullopt);
  const ProbeFailure garbled = FailureOf(Role(plain_to_tls, budget));
  CHECK(SteadyClock::now() - started < budget + milliseconds(500));
  CHECK(garbled.reason != ProbeFailureReason::kInternal);
  CHECK(garbled.message.find(tls.address()) != std::string::npos);
}

}  // namespace
TEST_CASE(
    "redis fence over TLS: a TLS-only master is fenced with the cluster's TLS and AUTH; a "
    "wrong CA fails before any command",
    "[redis][tls][fence]") {
  Pki pki;
  testing::RedisSandbox sandbox;
  const testing::RedisProcess& server =
      sandbox.StartTlsServer("tls", pki.ServerConfig(true) + "requirepass fence-secret\n");
  testing::RedisOnLoop check(server.address(), "", std::string("fence-secret"), pki.Client());
  auto ask = [&](std::vector<std::string> command) {
    const auto deadline = SteadyClock::now() + seconds(5);
    if (auto failure = check.Connect(deadline)) FAIL(failure->message);
    auto replies = check.Pipeline({std::move(command)}, deadline);
    if (auto* failure = std::get_if<ProbeFailure>(&replies)) FAIL(failure->message);
    return std::get<std::vector<RedisValue>>(replies).at(0);
  };

  RedisFenceTarget untrusted{server.address(), "", std::string("fence-secret"),
                             pki.Client("other-ca.pem"), milliseconds(3000)};
  const FenceOutcome refused = FenceRedis(untrusted);
  INFO(refused.detail);
  CHECK(refused.result == "failed");
  CHECK(refused.detail.find("connect: ") != std::string::npos);
  CHECK(refused.detail.find("verification failed") != std::string::npos);
  CHECK(refused.detail.find("fence-secret") == std::string::npos);
  CHECK(refused.undo.empty());
  CHECK(ask({"CONFIG", "GET", "min-replicas-to-write"}).items.at(1) == "0");

  RedisFenceTarget target{server.address(), "", std::string("fence-secret"), pki.Client(),
                          milliseconds(3000)};
  const FenceOutcome outcome = FenceRedis(target);
  INFO(outcome.detail);
  REQUIRE(outcome.result == "fenced");
  CHECK(outcome.verified);
  CHECK(outcome.detail.find("fence-secret") == std::string::npos);
  CHECK(outcome.undo == "CONFIG SET min-replicas-to-write 0 min-replicas-max-lag 10");
  // What the fence did, seen from another TLS connection: the guard set, writes refused.
  CHECK(ask({"CONFIG", "GET", "min-replicas-to-write"}).items.at(1) == "1000000");
  const RedisValue write = ask({"SET", "after", "fence"});
  CHECK(write.error);
  CHECK(write.text.rfind("NOREPLICAS", 0) == 0);
  // Its undo lifts it.
  CHECK(ask({"CONFIG", "SET", "min-replicas-to-write", "0", "min-replicas-max-lag", "10"}).text ==
        "OK");
  CHECK(ask({"SET", "after", "undo"}).text == "OK");
}

}  // namespace sbd
