#include "suppressors/silence_fetch.h"

#include <memory>

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

}  // namespace

std::vector<SilencesFetch> FetchAllSilences(const std::vector<std::string>& urls, Millis timeout,
                                            size_t max_bytes, EventLoop& loop) {
  if (loop.OnLoopThread()) {
    return std::vector<SilencesFetch>(
        urls.size(),
        SilencesFetch(std::in_place_index<1>, "internal: silences read on the event loop"));
  }
  // Every request is handed to the loop before the first wait, so they all run at once, to
  // one deadline; the waits that follow end by it (plus the grace for a late loop).
  const auto deadline = SteadyClock::now() + timeout;
  std::vector<std::unique_ptr<BlockingHttpCall>> calls;
  std::vector<std::string> paths;
  for (const std::string& url : urls) {
    const Endpoint ep = Split(url);
    HttpRequest request;
    request.url = ep.scheme_host_port + ep.path;
    request.headers = {"Accept: application/json"};
    request.bounds.max_body_bytes = max_bytes;
    if (ep.has_auth) {
      request.credentials.basic_user = ep.user;
      request.credentials.basic_password = ep.password;
    }
    calls.push_back(std::make_unique<BlockingHttpCall>(loop, std::move(request), deadline));
    paths.push_back(ep.path);
  }
  std::vector<SilencesFetch> results;
  for (size_t i = 0; i < calls.size(); ++i) {
    results.push_back(Interpret(calls[i]->Wait(), paths[i]));
  }
  return results;
}

SilencesFetch FetchSilences(const std::string& url, Millis timeout, size_t max_bytes) {
  return FetchAllSilences(std::vector<std::string>{url}, timeout, max_bytes).front();
}

}  // namespace sbd
