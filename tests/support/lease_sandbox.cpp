#include "tests/support/lease_sandbox.h"

#include <hiredis/hiredis.h>
#include <httplib.h>
#include <signal.h>

#include <memory>
#include <stdexcept>

#include "tests/support/files.h"
#include "tests/support/process.h"

namespace sbd::testing {

namespace {

BackgroundOptions DieWithParent() {
  BackgroundOptions options;
  options.die_with_parent = true;
  return options;
}

// The reply as redis-cli would print it, enough for test assertions.
std::string Describe(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      return std::string(reply.str, reply.len);
    case REDIS_REPLY_ERROR:
      return "(error) " + std::string(reply.str, reply.len);
    case REDIS_REPLY_INTEGER:
      return "(integer) " + std::to_string(reply.integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    default:
      return "(array of " + std::to_string(reply.elements) + ")";
  }
}

std::string RunRedisCommand(int port, const std::string& password,
                            const std::vector<std::string>& argv) {
  timeval timeout{2, 0};
  std::unique_ptr<redisContext, void (*)(redisContext*)> context(
      redisConnectWithTimeout("127.0.0.1", port, timeout), redisFree);
  if (!context || context->err != 0) {
    throw std::runtime_error("redis connect: " + std::string(context ? context->errstr : "oom"));
  }
  redisSetTimeout(context.get(), timeout);
  auto run = [&](const std::vector<std::string>& args) {
    std::vector<const char*> parts;
    std::vector<size_t> lengths;
    for (const auto& arg : args) {
      parts.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    auto* raw = static_cast<redisReply*>(redisCommandArgv(
        context.get(), static_cast<int>(parts.size()), parts.data(), lengths.data()));
    if (raw == nullptr) throw std::runtime_error("redis: " + std::string(context->errstr));
    std::string text = Describe(*raw);
    freeReplyObject(raw);
    return text;
  };
  if (!password.empty()) run({"AUTH", password});
  return run(argv);
}

}  // namespace

RedisServer::RedisServer(const std::string& password, const std::string& reader)
    : dir_("sbd-redis"), password_(password) {
  port_ = FreeLoopbackPort();
  std::string conf = "bind 127.0.0.1\nport " + std::to_string(port_) +
                     "\nsave \"\"\nappendonly no\ndaemonize no\ndir " + dir_.path() + "\n";
  if (!password.empty()) conf += "requirepass " + password + "\n";
  if (!reader.empty()) {
    conf += "user " + reader + " on >" + password + " ~* resetchannels -@all +@read +scan " +
            "+@connection\n";
  }
  const std::string conf_file = dir_.path() + "/redis.conf";
  WriteFile(conf_file, conf, 0600);
  const std::string log = dir_.path() + "/redis.log";
  pid_ = SpawnBackgroundProcess({"redis-server", conf_file}, log, DieWithParent());
  std::string how;
  auto ready = [&] {
    try {
      return RunRedisCommand(port_, password_, {"PING"}) == "PONG";
    } catch (const std::exception&) {
      return false;
    }
  };
  if (WaitUntilReady(pid_, ready, std::chrono::seconds(15), std::chrono::milliseconds(50), &how) !=
      StartupOutcome::kReady) {
    StopChildProcess(pid_, SIGKILL, std::chrono::seconds(2));
    throw std::runtime_error("redis-server did not start (" + how + "):\n" + Tail(log, 20));
  }
}

RedisServer::~RedisServer() { StopChildProcess(pid_, SIGTERM, std::chrono::seconds(5)); }

std::string RedisServer::Command(const std::vector<std::string>& argv) const {
  return RunRedisCommand(port_, password_, argv);
}

void RedisServer::Freeze() const { ::kill(pid_, SIGSTOP); }
void RedisServer::Resume() const { ::kill(pid_, SIGCONT); }

LeaseWorker::LeaseWorker(const std::string& binary, const Options& options,
                         const std::string& log_dir)
    : options_(options) {
  metrics_port_ = FreeLoopbackPort();
  log_file_ = log_dir + "/worker-" + options.token + ".log";
  pid_ = SpawnBackgroundProcess(
      {binary, "--redis-port", std::to_string(options.redis_port), "--key", options.key, "--lock",
       options.lock, "--token", options.token, "--ttl-ms", std::to_string(options.ttl.count()),
       "--renew-ms", std::to_string(options.renew.count()), "--metrics-port",
       std::to_string(metrics_port_)},
      log_file_, DieWithParent());
  std::string how;
  if (WaitUntilReady(
          pid_, [&] { return Renewals() >= 0; }, std::chrono::seconds(10),
          std::chrono::milliseconds(50), &how) != StartupOutcome::kReady) {
    StopChildProcess(pid_, SIGKILL, std::chrono::seconds(2));
    throw std::runtime_error("lease worker did not start (" + how + "):\n" + Tail(log_file_, 20));
  }
}

LeaseWorker::~LeaseWorker() { StopChildProcess(pid_, SIGTERM, std::chrono::seconds(5)); }

void LeaseWorker::Freeze() const { ::kill(pid_, SIGSTOP); }
void LeaseWorker::Resume() const { ::kill(pid_, SIGCONT); }

std::string LeaseWorker::Metrics() const {
  httplib::Client client("127.0.0.1", metrics_port_);
  client.set_connection_timeout(std::chrono::milliseconds(500));
  client.set_read_timeout(std::chrono::milliseconds(500));
  auto result = client.Get("/metrics");
  if (!result || result->status != 200) return "";
  return result->body;
}

long LeaseWorker::Renewals() const {
  const std::string text = Metrics();
  const std::string name = "lease_worker_renewals_total ";
  const auto at = text.find("\n" + name);
  if (at == std::string::npos) return -1;
  return std::stol(text.substr(at + 1 + name.size()));
}

bool LeaseWorker::Claims() const {
  return Metrics().find("token=\"" + options_.token + "\"} 1") != std::string::npos;
}

}  // namespace sbd::testing
