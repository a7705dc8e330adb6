#include "suppressors/silence_fetch.h"

#include <httplib.h>

#include <cctype>

namespace sbd {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct Endpoint {
  std::string scheme_host_port;  // for httplib::Client
  std::string path;              // "/prefix/api/v2/silences"
  std::string redacted;
  std::string user;
  std::string password;
  bool has_auth = false;
};

std::string PercentDecode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() &&
        std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The config checked the URL is http(s)://...; nothing here throws on a malformed one.
Endpoint Split(const std::string& url) {
  Endpoint ep;
  const auto scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "http" : url.substr(0, scheme_end);
  const std::string rest = scheme_end == std::string::npos ? url : url.substr(scheme_end + 3);
  const auto authority_end = rest.find_first_of("/?#");
  std::string authority = rest.substr(0, authority_end);
  std::string path = authority_end == std::string::npos ? "" : rest.substr(authority_end);
  path = path.substr(0, path.find_first_of("?#"));
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (const auto at = authority.rfind('@'); at != std::string::npos) {
    const std::string userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    ep.has_auth = true;
    ep.user = PercentDecode(userinfo.substr(0, colon));
    ep.password = colon == std::string::npos ? "" : PercentDecode(userinfo.substr(colon + 1));
  }
  ep.scheme_host_port = scheme + "://" + authority;
  ep.redacted = ep.scheme_host_port + path;
  ep.path = path + "/api/v2/silences";
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
