#include "suppressors/silence_fetch.h"

#include <condition_variable>
#include <memory>
#include <mutex>

#include "detector/common/alertmanager_url.h"
#include "probes/http_loop.h"

namespace sbd {
namespace {

// One Alertmanager: its parts (see alertmanager_url.h) and where silences are read.
struct Endpoint : AlertmanagerEndpoint {
  std::string path;  // "/prefix/api/v2/silences"
};

// The config checked the URL is http(s)://...; nothing here throws on a malformed one.
Endpoint Split(const std::string& url) {
  Endpoint ep;
  static_cast<AlertmanagerEndpoint&>(ep) = SplitAlertmanagerUrl(url);
  ep.path = ep.base_path + "/api/v2/silences";
  return ep;
}

}  // namespace

std::string RedactUrl(const std::string& url) { return Split(url).redacted; }

namespace {

// What the caller waits on and the loop fills in. `mu`'s fields are thread-safe; `clients`
// are the loop thread's only (made and dropped there).
struct Fetches {
  std::mutex mu;
  std::condition_variable answered;
  size_t left = 0;                     // guarded by mu
  std::vector<SilencesFetch> results;  // guarded by mu
  std::vector<std::unique_ptr<LoopHttpClient>> clients;
};

SilencesFetch Interpret(HttpResult result, const std::string& path) {
  // LoopHttpClient's words name the request and the bound, never the credentials.
  if (auto* failure = std::get_if<ProbeFailure>(&result)) {
    const bool unreached = failure->reason == ProbeFailureReason::kRefused ||
                           failure->reason == ProbeFailureReason::kUnreachable;
    // The words the status page and the logs have always used for a stopped Alertmanager.
    return SilencesFetch(
        std::in_place_index<1>,
        unreached ? "GET " + path + ": cannot connect (refused or unreachable)" : failure->message);
  }
  HttpAnswer& answer = std::get<HttpAnswer>(result);
  if (answer.status != 200) {
    return SilencesFetch(std::in_place_index<1>,
                         "GET " + path + ": HTTP " + std::to_string(answer.status));
  }
  return SilencesFetch(std::in_place_index<0>, std::move(answer.body));
}

void StartFetches(EventLoop& loop, const std::shared_ptr<Fetches>& fetches,
                  const std::vector<std::string>& urls, SteadyClock::time_point deadline,
                  size_t max_bytes) {
  for (size_t i = 0; i < urls.size(); ++i) {
    const Endpoint ep = Split(urls[i]);
    HttpRequest request;
    request.url = ep.scheme_host_port + ep.path;
    request.headers = {"Accept: application/json"};
    request.bounds.max_body_bytes = max_bytes;
    if (ep.has_auth) {
      request.credentials.basic_user = ep.user;
      request.credentials.basic_password = ep.password;
    }
    fetches->clients.push_back(std::make_unique<LoopHttpClient>(loop));
    fetches->clients.back()->Start(request, deadline, [fetches, i, path = ep.path](HttpResult r) {
      SilencesFetch fetched = Interpret(std::move(r), path);
      std::lock_guard<std::mutex> lock(fetches->mu);
      fetches->results[i] = std::move(fetched);
      --fetches->left;
      fetches->answered.notify_all();
    });
  }
}

}  // namespace

std::vector<SilencesFetch> FetchAllSilences(const std::vector<std::string>& urls, Millis timeout,
                                            size_t max_bytes, EventLoop& loop) {
  const SilencesFetch unanswered(std::in_place_index<1>,
                                 "no answer within " + std::to_string(timeout.count()) + " ms");
  if (loop.OnLoopThread()) {
    return std::vector<SilencesFetch>(
        urls.size(),
        SilencesFetch(std::in_place_index<1>, "internal: silences read on the event loop"));
  }
  auto fetches = std::make_shared<Fetches>();
  fetches->left = urls.size();
  fetches->results.assign(urls.size(), unanswered);
  const auto deadline = SteadyClock::now() + timeout;
  loop.Post([&loop, fetches, urls, deadline, max_bytes] {
    StartFetches(loop, fetches, urls, deadline, max_bytes);
  });
  std::vector<SilencesFetch> results;
  {
    std::unique_lock<std::mutex> lock(fetches->mu);
    // Every answer comes by its deadline; the grace is for a loop running late under load.
    fetches->answered.wait_until(lock, deadline + std::chrono::seconds(2),
                                 [&] { return fetches->left == 0; });
    results = fetches->results;
  }
  // The clients go on the loop thread (one still in flight is dropped without an answer).
  loop.Post([fetches] { fetches->clients.clear(); });
  return results;
}

SilencesFetch FetchSilences(const std::string& url, Millis timeout, size_t max_bytes) {
  return FetchAllSilences(std::vector<std::string>{url}, timeout, max_bytes).front();
}

}  // namespace sbd
