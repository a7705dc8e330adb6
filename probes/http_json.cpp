#include "probes/http_json.h"

#include <httplib.h>
#include <openssl/evp.h>

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

std::variant<nlohmann::json, ProbeFailure> FetchJson(const std::string& base_url,
                                                     const std::string& path,
                                                     const std::string& post_body,
                                                     SteadyClock::time_point deadline,
                                                     size_t max_bytes) {
  const auto remaining = deadline - SteadyClock::now();
  if (remaining <= SteadyClock::duration::zero()) {
    return ProbeFailure{ProbeFailureReason::kTimeout, "no time left"};
  }
  httplib::Client client(UrlBase(base_url));
  client.set_connection_timeout(remaining);
  client.set_read_timeout(remaining);
  client.set_write_timeout(remaining);
  client.set_keep_alive(false);

  httplib::Request request;
  request.method = post_body.empty() ? "GET" : "POST";
  request.path = path;
  request.body = post_body;
  if (!post_body.empty()) request.set_header("Content-Type", "application/json");
  std::string body;
  bool too_big = false;
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    if (body.size() + length > max_bytes) {
      too_big = true;
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
  if (!result) {
    const auto error = result.error();
    const std::string what = httplib::to_string(error);
    if (SteadyClock::now() >= deadline || error == httplib::Error::Read ||
        error == httplib::Error::ConnectionTimeout) {
      return ProbeFailure{ProbeFailureReason::kTimeout, request.method + " " + path + ": " + what};
    }
    if (error == httplib::Error::Connection) {
      return ProbeFailure{ProbeFailureReason::kRefused, request.method + " " + path + ": " + what};
    }
    return ProbeFailure{ProbeFailureReason::kInternal, request.method + " " + path + ": " + what};
  }
  // Patroni answers /patroni with 503 on a replica or a stopped server but still with the
  // JSON we want; any other status without JSON is a failure.
  auto json = nlohmann::json::parse(body, nullptr, false);
  if (json.is_discarded()) {
    return ProbeFailure{ProbeFailureReason::kProtocol, request.method + " " + path + ": HTTP " +
                                                           std::to_string(result->status) +
                                                           " with a body that is not JSON"};
  }
  if (result->status == 401 || result->status == 403) {
    return ProbeFailure{ProbeFailureReason::kAuth,
                        request.method + " " + path + ": HTTP " + std::to_string(result->status)};
  }
  if (result->status >= 300 && result->status != 503) {
    return ProbeFailure{ProbeFailureReason::kProtocol,
                        request.method + " " + path + ": HTTP " + std::to_string(result->status)};
  }
  return json;
}

std::string Base64Encode(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> Base64Decode(const std::string& text) {
  if (text.size() % 4 != 0) return std::nullopt;
  if (text.empty()) return std::string();
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t padding = 0;
  for (size_t i = text.size(); i > 0 && text[i - 1] == '=' && padding < 2; --i) ++padding;
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

}  // namespace sbd
