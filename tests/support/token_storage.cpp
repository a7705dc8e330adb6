// A protected resource for the tests (issue 13, part 2): a storage process that takes writes
// with a fencing token, the way the field guide's rung 3 describes it.
//
//   token_storage --port N --lock L [--check on|off]
//
// POST /write?token=T (T a decimal token). With the check on (the default), a token below the
// one stored is rejected (409) and the stored token is the highest accepted; with it off, every
// write is accepted and stores its own token, as a resource that stopped checking does. GET
// /metrics serves fencing_token_highest_accepted{name=L} (the stored token; absent before the
// first write), token_storage_accepted_writes_total and token_storage_rejected_writes_total.
#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  if (!args.count("--port") || !args.count("--lock")) {
    std::fprintf(stderr, "usage: token_storage --port N --lock L [--check on|off]\n");
    return 2;
  }
  const int port = std::atoi(args["--port"].c_str());
  const std::string lock = args["--lock"];
  const bool check = args.count("--check") == 0 || args["--check"] != "off";

  std::mutex mu;
  long long stored = -1;
  long accepted = 0, rejected = 0;
  httplib::Server server;
  server.Post("/write", [&](const httplib::Request& req, httplib::Response& res) {
    long long token = -1;
    try {
      token = std::stoll(req.get_param_value("token"));
    } catch (const std::exception&) {
      res.status = 400;
      return;
    }
    std::lock_guard<std::mutex> guard(mu);
    if (check && token < stored) {
      ++rejected;
      res.status = 409;
      res.set_content("stale token " + std::to_string(token) + " < " + std::to_string(stored),
                      "text/plain");
      std::printf("rejected token %lld (stored %lld)\n", token, stored);
      std::fflush(stdout);
      return;
    }
    if (token != stored) std::printf("accepted token %lld (stored %lld)\n", token, stored);
    std::fflush(stdout);
    ++accepted;
    stored = token;
    res.set_content("ok", "text/plain");
  });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> guard(mu);
    std::string text;
    if (stored >= 0) {
      text +=
          "# TYPE fencing_token_highest_accepted gauge\nfencing_token_highest_accepted{name=\"" +
          lock + "\"} " + std::to_string(stored) + "\n";
    }
    text +=
        "# TYPE token_storage_accepted_writes_total counter\n"
        "token_storage_accepted_writes_total " +
        std::to_string(accepted) +
        "\n# TYPE token_storage_rejected_writes_total counter\n"
        "token_storage_rejected_writes_total " +
        std::to_string(rejected) + "\n";
    res.set_content(text, "text/plain; version=0.0.4");
  });
  // SIGTERM's default action ends it: it keeps nothing that needs saving.
  if (!server.listen("127.0.0.1", port)) {
    std::fprintf(stderr, "token_storage: cannot listen on 127.0.0.1:%d\n", port);
    return 1;
  }
  return 0;
}
