// A candidate of an etcd v3 election for the tests (issue 13), on the v3 JSON gateway, the way
// the `concurrency` recipes campaign, exporting its belief as client-go does.
//
//   etcd_candidate --endpoint URL --prefix P --lock L --value V --ttl-s N --renew-ms N
//                  --metrics-port N [--storage-port N]
//
// Campaign: grant a lease of ttl-s, put <P>/<lease id in hex> = V with it, and hold once its
// key has the lowest create revision under <P>/ (checked every renew-ms while waiting). The
// token is the key's create revision. Every renew-ms: keep the lease alive; a keep-alive that
// fails or finds the lease gone drops the claim and campaigns again. SIGUSR1 resigns (revokes
// the lease, campaigns again at the back of the queue); SIGTERM/SIGINT revoke and exit.
// With a storage port, once a period while it believes it holds (and at once when back from a
// pause) it also writes to the protected resource
// (tests/support/token_storage.cpp) with its token: POST /write?token=<revision>.
// GET /metrics on 127.0.0.1:N serves leader_election_master_status{name=L,token=<revision>}
// 1|0 and etcd_candidate_renewals_total.
//
// The wait between renewals counts the candidate's own running time in 10 ms slices, so a
// freeze (SIGSTOP) goes unnoticed: resumed, it keeps claiming until its next keep-alive fails,
// like a process back from a long GC pause. That is the zombie window the tests need.
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "detector/common/base64.h"

namespace {

using nlohmann::json;

std::atomic<bool> g_stop{false};
std::atomic<bool> g_resign{false};
void OnStop(int) { g_stop = true; }
void OnResign(int) { g_resign = true; }

struct Options {
  std::string endpoint, prefix, lock, value;
  long ttl_s = 3, renew_ms = 1000;
  int metrics_port = 0;
  int storage_port = 0;
};

void Log(const std::string& message) {
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  std::printf("%lld.%03lld %s\n", static_cast<long long>(now / 1000),
              static_cast<long long>(now % 1000), message.c_str());
  std::fflush(stdout);
}

// POST /v3/<api>; the answer, or null on any failure.
json Post(const Options& options, const std::string& api, const json& body) {
  httplib::Client client(options.endpoint);
  client.set_connection_timeout(std::chrono::milliseconds(500));
  client.set_read_timeout(std::chrono::milliseconds(500));
  auto result = client.Post("/v3/" + api, body.dump(), "application/json");
  if (!result || result->status != 200) {
    Log("POST " + api + " failed");
    return json();
  }
  return json::parse(result->body, nullptr, false);
}

long long Number(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return 0;
  const json& v = object[key];
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_string()) return std::stoll(v.get<std::string>());
  return 0;
}

class Candidate {
 public:
  explicit Candidate(const Options& options) : options_(options) {}

  // Puts a new key with a new lease; false on failure.
  bool Campaign() {
    const json grant = Post(options_, "lease/grant", {{"TTL", options_.ttl_s}});
    lease_ = Number(grant, "ID");
    if (lease_ == 0) return false;
    char hex[32];
    std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(lease_));
    key_ = options_.prefix + "/" + hex;
    const json put = {{"key", sbd::Base64Encode(key_)},
                      {"value", sbd::Base64Encode(options_.value)},
                      {"lease", std::to_string(lease_)}};
    const json answer = Post(options_, "kv/put", put);
    revision_ = Number(answer.value("header", json::object()), "revision");
    Log("campaigning with " + key_ + " at revision " + std::to_string(revision_));
    return revision_ > 0;
  }

  // True when the lowest create revision under the prefix is ours.
  bool First() const {
    std::string end = options_.prefix + "/";
    end.back() = static_cast<char>(end.back() + 1);
    const json range = {{"key", sbd::Base64Encode(options_.prefix + "/")},
                        {"range_end", sbd::Base64Encode(end)},
                        {"sort_order", "ASCEND"},
                        {"sort_target", "CREATE"},
                        {"limit", 1}};
    const json answer = Post(options_, "kv/range", range);
    if (!answer.is_object() || !answer.contains("kvs") || answer["kvs"].empty()) return false;
    return Number(answer["kvs"][0], "create_revision") == revision_;
  }

  // True while the lease lives.
  bool KeepAlive() const {
    const json answer = Post(options_, "lease/keepalive", {{"ID", std::to_string(lease_)}});
    return Number(answer.value("result", json::object()), "TTL") > 0;
  }

  void Revoke() {
    if (lease_ != 0) Post(options_, "lease/revoke", {{"ID", std::to_string(lease_)}});
    lease_ = 0;
    revision_ = 0;
  }

  bool campaigning() const { return lease_ != 0; }
  long long revision() const { return revision_; }

 private:
  const Options& options_;
  long long lease_ = 0;
  long long revision_ = 0;
  std::string key_;
};

bool ParseArgs(int argc, char** argv, Options* options) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  try {
    options->endpoint = args.at("--endpoint");
    options->prefix = args.at("--prefix");
    options->lock = args.at("--lock");
    options->value = args.at("--value");
    options->ttl_s = std::stol(args.at("--ttl-s"));
    options->renew_ms = std::stol(args.at("--renew-ms"));
    options->metrics_port = std::stoi(args.at("--metrics-port"));
    if (args.count("--storage-port")) options->storage_port = std::stoi(args["--storage-port"]);
  } catch (const std::exception&) {
    return false;
  }
  return options->ttl_s > 0 && options->renew_ms > 0;
}

// Waits `millis` of the candidate's own running time (see the top of the file). Back from a
// pause (a slice that took far longer than it slept), it calls `resumed` at once: the work it
// was doing when paused goes on, as it does in a process back from a long GC pause.
void WaitRunningTime(long millis, const std::function<void()>& resumed) {
  for (long slept = 0; slept < millis && !g_stop && !g_resign; slept += 10) {
    const auto before = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (std::chrono::steady_clock::now() - before > std::chrono::milliseconds(500)) resumed();
  }
}

// The holder's work: one write to the protected resource with its token.
void Write(const Options& options, long long token) {
  if (options.storage_port == 0) return;
  httplib::Client client("127.0.0.1", options.storage_port);
  client.set_connection_timeout(std::chrono::milliseconds(500));
  client.set_read_timeout(std::chrono::milliseconds(500));
  auto result = client.Post("/write?token=" + std::to_string(token), "", "text/plain");
  if (!result) {
    Log("write with token " + std::to_string(token) + ": no answer");
  } else if (result->status != 200) {
    Log("write with token " + std::to_string(token) + " refused: " + result->body);
  }
}

// One step of the loop: renew or campaign, and say whether it holds.
bool Step(Candidate& candidate, bool holding, std::atomic<long>& renewals) {
  if (g_resign.exchange(false)) {
    Log("resigning");
    candidate.Revoke();
    return false;
  }
  if (!candidate.campaigning() && !candidate.Campaign()) return false;
  if (!candidate.KeepAlive()) {
    Log("lost the lease");
    candidate.Revoke();
    return false;
  }
  ++renewals;
  return holding || candidate.First();
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, &options)) {
    std::fprintf(stderr,
                 "usage: etcd_candidate --endpoint URL --prefix P --lock L --value V --ttl-s N "
                 "--renew-ms N --metrics-port N\n");
    return 2;
  }
  struct sigaction stop {};
  stop.sa_handler = OnStop;
  sigaction(SIGTERM, &stop, nullptr);
  sigaction(SIGINT, &stop, nullptr);
  struct sigaction resign {};
  resign.sa_handler = OnResign;
  sigaction(SIGUSR1, &resign, nullptr);

  std::atomic<bool> holding{false};
  std::atomic<long long> token{0};
  std::atomic<long> renewals{0};
  httplib::Server server;
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        "# TYPE leader_election_master_status gauge\nleader_election_master_status{name=\"" +
            options.lock + "\",token=\"" + std::to_string(token.load()) + "\"} " +
            (holding ? "1" : "0") +
            "\n# TYPE etcd_candidate_renewals_total counter\netcd_candidate_renewals_total " +
            std::to_string(renewals.load()) + "\n",
        "text/plain; version=0.0.4");
  });
  if (!server.bind_to_port("127.0.0.1", options.metrics_port)) {
    std::fprintf(stderr, "etcd_candidate: cannot listen on 127.0.0.1:%d\n", options.metrics_port);
    return 1;
  }
  std::thread http([&] { server.listen_after_bind(); });

  Candidate candidate(options);
  while (!g_stop) {
    // A resigning holder stops claiming before its key goes, so a hand-over never overlaps.
    if (g_resign) holding = false;
    // The work, once a period, in the belief it holds.
    if (holding) Write(options, token);
    const bool was_holding = holding;
    const bool now_holding = Step(candidate, was_holding, renewals);
    // The token is set before the claim, so that a claim never shows another key's revision.
    if (now_holding) token = candidate.revision();
    holding = now_holding;
    if (now_holding != was_holding) {
      Log(now_holding ? "elected with token " + std::to_string(token.load()) : "not holding");
    }
    WaitRunningTime(options.renew_ms, [&] {
      if (holding) Write(options, token);
    });
  }
  holding = false;
  candidate.Revoke();
  server.stop();
  http.join();
  return 0;
}
