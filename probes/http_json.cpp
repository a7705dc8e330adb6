#include "probes/http_json.h"

#include "probes/json_fields.h"

namespace sbd {

std::string UrlBase(const std::string& url) {
  const auto scheme_end = url.find("://");
  const size_t host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  size_t host_end = url.find('/', host_start);
  if (host_end == std::string::npos) host_end = url.size();
  std::string authority = url.substr(host_start, host_end - host_start);
  const auto at = authority.rfind('@');
  if (at != std::string::npos) authority = authority.substr(at + 1);
  const std::string scheme = scheme_end == std::string::npos ? "http" : url.substr(0, scheme_end);
  return scheme + "://" + authority;
}

namespace {

// Patroni answers /patroni with 503 on a replica or a stopped server but still with the JSON
// we want; any other status without JSON is a failure.
std::variant<nlohmann::json, ProbeFailure> Interpret(int status, const std::string& body,
                                                     const std::string& what_request) {
  const std::string http = what_request + ": HTTP " + std::to_string(status);
  auto parsed = ParseUntrustedJson(body);
  if (auto* problem = std::get_if<std::string>(&parsed)) {
    return ProbeFailure{ProbeFailureReason::kProtocol,
                        http + " with a body " +
                            (*problem == "not JSON" ? "that is not JSON" : "of JSON " + *problem)};
  }
  auto& json = std::get<nlohmann::json>(parsed);
  if (status == 401 || status == 403) return ProbeFailure{ProbeFailureReason::kAuth, http};
  if (status >= 300 && status != 503) return ProbeFailure{ProbeFailureReason::kProtocol, http};
  return json;
}

}  // namespace

void StartFetchJson(LoopHttpClient& client, const std::string& base_url, const std::string& path,
                    const std::string& post_body, SteadyClock::time_point deadline,
                    std::function<void(std::variant<nlohmann::json, ProbeFailure>)> done,
                    size_t max_bytes) {
  const std::string base = UrlBase(base_url);
  HttpRequest request;
  request.url = base + path;
  request.post_body = post_body;
  request.bounds.max_body_bytes = max_bytes;
  const std::string what_request = (post_body.empty() ? "GET " : "POST ") + path;
  client.Start(request, deadline, [done = std::move(done), what_request](HttpResult result) {
    if (auto* failure = std::get_if<ProbeFailure>(&result)) return done(std::move(*failure));
    const HttpAnswer& answer = std::get<HttpAnswer>(result);
    done(Interpret(static_cast<int>(answer.status), answer.body, what_request));
  });
}

}  // namespace sbd
