// A lease worker for the tests (issue 12, test 5): competes for one Redis key with its token,
// the way application locks do, and exports its belief as client-go does.
//
//   lease_worker --redis-port P --key K --lock L --token T --ttl-ms N --renew-ms N
//                --metrics-port N [--redis-host H]
//
// Acquire: SET K T NX PX ttl. Renew (every renew-ms): PEXPIRE only while the value is still T
// (a Lua compare-and-set). Release on SIGTERM/SIGINT: DEL only while the value is T. Any
// failure to renew drops the claim. GET /metrics on 127.0.0.1:N serves
// leader_election_master_status{name=L,token=T} 1|0 and lease_worker_renewals_total.
//
// The wait between renewals counts the worker's own running time in 10 ms slices, so a freeze
// (SIGSTOP) goes unnoticed: resumed, the worker keeps claiming until its next renewal fails,
// like a process back from a long GC pause. That is the zombie window the tests need.
#include <hiredis/hiredis.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

constexpr const char* kRenewScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
constexpr const char* kReleaseScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

struct Options {
  std::string redis_host = "127.0.0.1";
  int redis_port = 6379;
  std::string key, lock, token;
  long ttl_ms = 3000, renew_ms = 1000;
  int metrics_port = 0;
};

std::string LabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

void Log(const std::string& message) {
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  std::printf("%lld.%03lld %s\n", static_cast<long long>(now / 1000),
              static_cast<long long>(now % 1000), message.c_str());
  std::fflush(stdout);
}

class Redis {
 public:
  explicit Redis(const Options& options) : options_(options) {}
  ~Redis() { Drop(); }
  /// The command's integer or status reply ("OK", "1", "nil"); "" on any failure.
  std::string Run(const std::vector<std::string>& argv) {
    if (context_ == nullptr && !Connect()) return "";
    std::vector<const char*> parts;
    std::vector<size_t> lengths;
    for (const auto& arg : argv) {
      parts.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(context_, static_cast<int>(parts.size()), parts.data(), lengths.data()));
    if (reply == nullptr) {
      Log("redis: " + std::string(context_->errstr));
      Drop();
      return "";
    }
    std::string text;
    if (reply->type == REDIS_REPLY_STATUS) text.assign(reply->str, reply->len);
    if (reply->type == REDIS_REPLY_INTEGER) text = std::to_string(reply->integer);
    if (reply->type == REDIS_REPLY_NIL) text = "nil";
    if (reply->type == REDIS_REPLY_ERROR)
      Log("redis error: " + std::string(reply->str, reply->len));
    freeReplyObject(reply);
    return text;
  }

 private:
  bool Connect() {
    const timeval timeout{1, 0};
    context_ = redisConnectWithTimeout(options_.redis_host.c_str(), options_.redis_port, timeout);
    if (context_ == nullptr || context_->err != 0) {
      Log("connect: " + std::string(context_ ? context_->errstr : "out of memory"));
      Drop();
      return false;
    }
    redisSetTimeout(context_, timeout);
    return true;
  }
  void Drop() {
    if (context_ != nullptr) redisFree(context_);
    context_ = nullptr;
  }
  const Options& options_;
  redisContext* context_ = nullptr;
};

bool ParseArgs(int argc, char** argv, Options* options) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  try {
    if (args.count("--redis-host")) options->redis_host = args["--redis-host"];
    options->redis_port = std::stoi(args.at("--redis-port"));
    options->key = args.at("--key");
    options->lock = args.at("--lock");
    options->token = args.at("--token");
    options->ttl_ms = std::stol(args.at("--ttl-ms"));
    options->renew_ms = std::stol(args.at("--renew-ms"));
    options->metrics_port = std::stoi(args.at("--metrics-port"));
  } catch (const std::exception&) {
    return false;
  }
  return options->ttl_ms > 0 && options->renew_ms > 0;
}

// Waits `millis` of the worker's own running time (see the top of the file).
void WaitRunningTime(long millis) {
  for (long slept = 0; slept < millis && !g_stop; slept += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, &options)) {
    std::fprintf(stderr,
                 "usage: lease_worker --redis-port P --key K --lock L --token T --ttl-ms N "
                 "--renew-ms N --metrics-port N [--redis-host H]\n");
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  std::atomic<bool> holding{false};
  std::atomic<long> renewals{0};
  httplib::Server server;
  const std::string series = "leader_election_master_status{name=\"" + LabelValue(options.lock) +
                             "\",token=\"" + LabelValue(options.token) + "\"} ";
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        "# HELP leader_election_master_status Whether this process holds the lock.\n"
        "# TYPE leader_election_master_status gauge\n" +
            series + (holding ? "1" : "0") +
            "\n# HELP lease_worker_renewals_total Acquisitions and renewals that succeeded.\n"
            "# TYPE lease_worker_renewals_total counter\nlease_worker_renewals_total " +
            std::to_string(renewals.load()) + "\n",
        "text/plain; version=0.0.4");
  });
  if (!server.bind_to_port("127.0.0.1", options.metrics_port)) {
    std::fprintf(stderr, "lease_worker: cannot listen on 127.0.0.1:%d\n", options.metrics_port);
    return 1;
  }
  std::thread http([&] { server.listen_after_bind(); });

  Redis redis(options);
  const std::string ttl = std::to_string(options.ttl_ms);
  while (!g_stop) {
    const bool was_holding = holding;
    const std::string reply =
        was_holding ? redis.Run({"EVAL", kRenewScript, "1", options.key, options.token, ttl})
                    : redis.Run({"SET", options.key, options.token, "NX", "PX", ttl});
    holding = was_holding ? reply == "1" : reply == "OK";
    if (holding) ++renewals;
    if (holding != was_holding) Log(holding ? "acquired" : "lost the lease");
    WaitRunningTime(options.renew_ms);
  }
  if (holding) {
    holding = false;
    Log("released: " + redis.Run({"EVAL", kReleaseScript, "1", options.key, options.token}));
  }
  server.stop();
  http.join();
  return 0;
}
