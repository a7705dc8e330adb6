#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "detector/common/base64.h"
#include "probes/http_loop.h"
#include "probes/probe.h"

namespace sbd {

/// The largest JSON answer a probe accepts; anything bigger is a protocol failure.
constexpr size_t kMaxResponseBytes = 1 << 20;

/// GET (empty body) or POST (JSON body) `path` on `base_url` ("http://host:port" or https)
/// and parse the JSON answer, sent by `client` (bounded as a whole, see LoopHttpClient): all
/// before `deadline`. Connection refused, timeouts, non-2xx statuses (Patroni's 503 with JSON
/// aside), oversized and malformed answers come back as failures with a reason. `done` runs
/// once on the loop thread. Loop thread only.
void StartFetchJson(LoopHttpClient& client, const std::string& base_url, const std::string& path,
                    const std::string& post_body, SteadyClock::time_point deadline,
                    std::function<void(std::variant<nlohmann::json, ProbeFailure>)> done,
                    size_t max_bytes = kMaxResponseBytes);

/// "scheme://host:port" of a URL, dropping any path and any user:password@ part.
std::string UrlBase(const std::string& url);

}  // namespace sbd
