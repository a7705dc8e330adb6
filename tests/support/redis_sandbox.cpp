#include "tests/support/redis_sandbox.h"

#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tests/support/process.h"

namespace sbd::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Field(const std::string& info, const std::string& key) {
  const std::string text = "\n" + info;
  const size_t at = text.find("\n" + key + ":");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size() + 2;
  return Trim(text.substr(from, text.find('\n', from) - from));
}

}  // namespace

RedisProcess::~RedisProcess() { Stop(); }

std::string RedisProcess::Cli(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"redis-cli", "-h", "127.0.0.1", "-p", std::to_string(port_)};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult result = RunCommand(argv, false, seconds(10));
  if (result.exit_code != 0) {
    throw std::runtime_error(DescribeCommandRun(argv, result.exit_code, result.output));
  }
  return Trim(result.output);
}

std::string RedisProcess::Role() const {
  CommandResult r = RunCommand(
      {"redis-cli", "-h", "127.0.0.1", "-p", std::to_string(port_), "INFO", "replication"}, false,
      seconds(2));
  return r.exit_code == 0 ? Field(r.output, "role") : "";
}

void RedisProcess::Freeze() { kill(pid_, SIGSTOP); }
void RedisProcess::Resume() { kill(pid_, SIGCONT); }

void RedisProcess::Stop() {
  if (pid_ > 0) StopChildProcess(pid_, SIGTERM, milliseconds(5000));
  pid_ = -1;
}

RedisSandbox::RedisSandbox() : root_("sbd-redis") {}

RedisSandbox::~RedisSandbox() {
  sentinels_.clear();
  servers_.clear();
}

std::unique_ptr<RedisProcess> RedisSandbox::Spawn(const std::string& binary,
                                                  const std::string& name,
                                                  const std::string& config_text, bool tls_only) {
  const std::string dir = root_.path() + "/" + name;
  mkdir(dir.c_str(), 0700);
  const int port = FreeLoopbackPort();
  const std::string config = dir + "/redis.conf";
  std::ofstream(config) << "port " << port << "\nbind 127.0.0.1\ndir " << dir
                        << "\nsave \"\"\nappendonly no\n"
                        << config_text;
  if (tls_only) std::ofstream(config, std::ios::app) << "port 0\ntls-port " << port << "\n";
  const pid_t pid = SpawnBackgroundProcess({binary, config}, dir + "/redis.log",
                                           BackgroundOptions{false, dir, false, true});
  auto process = std::make_unique<RedisProcess>(name, dir, port, pid);
  std::string how;
  const auto ready = WaitUntilReady(
      pid,
      [&] {
        if (tls_only) {
          std::stringstream log;
          log << std::ifstream(dir + "/redis.log").rdbuf();
          return log.str().find("Ready to accept connections") != std::string::npos;
        }
        return RunCommand({"redis-cli", "-p", std::to_string(port), "PING"}, false, seconds(2))
                   .output.find("PONG") != std::string::npos;
      },
      seconds(20), milliseconds(50), &how);
  if (ready != StartupOutcome::kReady) {
    throw std::runtime_error(binary + " " + name + " did not start: " + how);
  }
  return process;
}

RedisProcess& RedisSandbox::StartServer(const std::string& name, const RedisProcess* master) {
  std::string extra;
  if (master != nullptr) extra = "replicaof 127.0.0.1 " + std::to_string(master->port()) + "\n";
  servers_.push_back(Spawn("redis-server", name, extra));
  RedisProcess& server = *servers_.back();
  if (master != nullptr) {
    const bool linked = WaitFor(
        [&] {
          return Field(server.Cli({"INFO", "replication"}), "master_link_status") == "up";
        },
        seconds(20));
    if (!linked) throw std::runtime_error(name + " never linked to " + master->name());
  }
  return server;
}

RedisProcess& RedisSandbox::StartTlsServer(const std::string& name, const std::string& tls_config) {
  servers_.push_back(Spawn("redis-server", name, tls_config, true));
  return *servers_.back();
}

void RedisSandbox::StartSentinels(const std::string& master_name, const RedisProcess& master,
                                  int count, milliseconds down_after,
                                  milliseconds failover_timeout) {
  const std::string config = "sentinel monitor " + master_name + " 127.0.0.1 " +
                             std::to_string(master.port()) +
                             " 2\nsentinel down-after-milliseconds " + master_name + " " +
                             std::to_string(down_after.count()) + "\nsentinel failover-timeout " +
                             master_name + " " + std::to_string(failover_timeout.count()) + "\n";
  for (int i = 0; i < count; ++i) {
    sentinels_.push_back(Spawn("redis-sentinel", "sentinel-" + std::to_string(i + 1), config));
  }
  for (const auto& sentinel : sentinels_) {
    const bool sees_all = WaitFor(
        [&] {
          const std::string info = sentinel->Cli({"SENTINEL", "master", master_name});
          return info.find("num-other-sentinels\n" + std::to_string(count - 1)) !=
                 std::string::npos;
        },
        seconds(30), milliseconds(100));
    if (!sees_all) throw std::runtime_error(sentinel->name() + " never saw the other sentinels");
  }
}

RedisProcess& RedisSandbox::StartSentinel(const std::string& name, const std::string& config) {
  sentinels_.push_back(Spawn("redis-sentinel", name, config));
  return *sentinels_.back();
}

std::string RedisSandbox::SentinelMaster(const std::string& master_name) const {
  if (sentinels_.empty()) return "";
  const std::string out =
      sentinels_.front()->Cli({"SENTINEL", "get-master-addr-by-name", master_name});
  const size_t newline = out.find('\n');
  if (newline == std::string::npos) return "";
  return out.substr(0, newline) + ":" + out.substr(newline + 1);
}

}  // namespace sbd::testing
