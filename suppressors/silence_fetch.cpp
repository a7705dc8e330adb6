#include "suppressors/silence_fetch.h"

#include <httplib.h>

#include <cctype>

#include "detector/common/alertmanager_url.h"

namespace sbd {
namespace {

using SteadyClock = std::chrono::steady_clock;

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

std::variant<std::string, std::string> FetchSilences(const std::string& url, Millis timeout,
                                                     size_t max_bytes) {
  using Result = std::variant<std::string, std::string>;
  const Endpoint ep = Split(url);
  const auto deadline = SteadyClock::now() + timeout;
  std::string body;
  bool too_big = false;
  bool too_late = false;
  try {
    httplib::Client client(ep.scheme_host_port);
    client.set_connection_timeout(timeout);
    client.set_read_timeout(timeout);
    client.set_write_timeout(timeout);
    client.set_keep_alive(false);
    if (ep.has_auth) client.set_basic_auth(ep.user, ep.password);
    httplib::Request request;
    request.method = "GET";
    request.path = ep.path;
    request.set_header("Accept", "application/json");
    // A server that drips its answer byte by byte must not hold the read past the deadline.
    request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
      too_big = body.size() + length > max_bytes;
      too_late = SteadyClock::now() > deadline;
      if (too_big || too_late) return false;
      body.append(data, length);
      return true;
    };
    const httplib::Result result = client.send(request);
    if (too_big)
      return Result(std::in_place_index<1>,
                    "answer larger than " + std::to_string(max_bytes) + " bytes");
    if (too_late || (!result && SteadyClock::now() >= deadline)) {
      return Result(std::in_place_index<1>,
                    "no complete answer within " + std::to_string(timeout.count()) + "ms");
    }
    if (!result) {
      const std::string what = result.error() == httplib::Error::Connection
                                   ? "cannot connect (refused or unreachable)"
                                   : httplib::to_string(result.error());
      return Result(std::in_place_index<1>, "GET " + ep.path + ": " + what);
    }
    if (result->status != 200) {
      return Result(std::in_place_index<1>,
                    "GET " + ep.path + ": HTTP " + std::to_string(result->status));
    }
  } catch (const std::exception& e) {
    return Result(std::in_place_index<1>, std::string("GET failed: ") + e.what());
  }
  return Result(std::in_place_index<0>, std::move(body));
}

}  // namespace sbd
