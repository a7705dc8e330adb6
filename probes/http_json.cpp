#include "probes/http_json.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>

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

bool AllDigits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
}

// httplib::Client throws on a scheme other than http(s) and on a port that does not fit an
// int. A URL read from the DCS or a file_sd label can be anything, so it is checked first.
std::optional<std::string> UnusableBase(const std::string& base) {
  const auto scheme_end = base.find("://");  // UrlBase() always writes one
  const std::string scheme = base.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return "the URL's scheme is neither http nor https";
  const std::string authority = base.substr(scheme_end + 3);
  const auto bracket = authority.rfind(']');
  const auto colon = authority.rfind(':');
  std::string host = authority;
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    const std::string port = authority.substr(colon + 1);
    if (!AllDigits(port) || port.size() > 5 || std::stoi(port) > 65535) {
      return "the URL's port is not a port number";
    }
    host = authority.substr(0, colon);
  }
  if (host.empty()) return "the URL has no host";
  return std::nullopt;
}

ProbeFailure SendFailure(httplib::Error error, const std::string& what_request,
                         SteadyClock::time_point deadline) {
  const std::string what = what_request + ": " + httplib::to_string(error);
  if (SteadyClock::now() >= deadline || error == httplib::Error::Read ||
      error == httplib::Error::ConnectionTimeout) {
    return ProbeFailure{ProbeFailureReason::kTimeout, what};
  }
  if (error == httplib::Error::Connection) return ProbeFailure{ProbeFailureReason::kRefused, what};
  return ProbeFailure{ProbeFailureReason::kInternal, what};
}

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

std::variant<nlohmann::json, ProbeFailure> Fetch(const std::string& base, httplib::Request& request,
                                                 SteadyClock::time_point deadline,
                                                 size_t max_bytes) {
  const auto remaining = deadline - SteadyClock::now();
  httplib::Client client(base);
  client.set_connection_timeout(remaining);
  client.set_read_timeout(remaining);
  client.set_write_timeout(remaining);
  client.set_keep_alive(false);
  std::string body;
  bool too_big = false;
  bool too_late = false;
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    if (body.size() + length > max_bytes) {
      too_big = true;
      return false;
    }
    // The read timeout bounds each read, not the answer: a trickle must not outlast the deadline.
    if (SteadyClock::now() >= deadline) {
      too_late = true;
      return false;
    }
    body.append(data, length);
    return true;
  };
  httplib::Result result = client.send(request);
  if (too_big) {
    return ProbeFailure{ProbeFailureReason::kProtocol,
                        "answer larger than " + std::to_string(max_bytes) + " bytes"};
  }
  if (too_late) {
    return ProbeFailure{ProbeFailureReason::kTimeout, request.method + " " + request.path +
                                                          ": the answer outlasted the deadline"};
  }
  const std::string what_request = request.method + " " + request.path;
  if (!result) return SendFailure(result.error(), what_request, deadline);
  return Interpret(result->status, body, what_request);
}

}  // namespace

std::variant<nlohmann::json, ProbeFailure> FetchJson(const std::string& base_url,
                                                     const std::string& path,
                                                     const std::string& post_body,
                                                     SteadyClock::time_point deadline,
                                                     size_t max_bytes) {
  if (deadline - SteadyClock::now() <= SteadyClock::duration::zero()) {
    return ProbeFailure{ProbeFailureReason::kTimeout, "no time left"};
  }
  const std::string base = UrlBase(base_url);
  if (auto problem = UnusableBase(base)) return ProbeFailure{ProbeFailureReason::kConfig, *problem};
  httplib::Request request;
  request.method = post_body.empty() ? "GET" : "POST";
  request.path = path;
  request.body = post_body;
  if (!post_body.empty()) request.set_header("Content-Type", "application/json");
  try {
    return Fetch(base, request, deadline, max_bytes);
  } catch (const std::exception& e) {
    // httplib is not documented to throw past the checks above; a last line of defence.
    return ProbeFailure{ProbeFailureReason::kInternal,
                        request.method + " " + path + ": " + e.what()};
  }
}

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
