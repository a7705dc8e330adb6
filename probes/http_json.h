#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "probes/probe.h"

namespace sbd {

/// The largest JSON answer a probe accepts; anything bigger is a protocol failure.
constexpr size_t kMaxResponseBytes = 1 << 20;

/// GET (empty body) or POST (JSON body) `path` on `base_url` ("http://host:port" or https)
/// and parse the JSON answer, all before `deadline`. Connection refused, timeouts, non-2xx
/// statuses, oversized and malformed answers come back as failures with a reason. Never
/// throws. Thread-safe (no shared state).
std::variant<nlohmann::json, ProbeFailure> FetchJson(const std::string& base_url,
                                                     const std::string& path,
                                                     const std::string& post_body,
                                                     SteadyClock::time_point deadline,
                                                     size_t max_bytes = kMaxResponseBytes);

/// Standard base64 (with padding), as etcd's JSON gateway uses for keys and values.
std::string Base64Encode(const std::string& bytes);
/// Decodes standard base64; nullopt when malformed.
std::optional<std::string> Base64Decode(const std::string& text);

/// "scheme://host:port" of a URL, dropping any path and any user:password@ part.
std::string UrlBase(const std::string& url);

}  // namespace sbd
