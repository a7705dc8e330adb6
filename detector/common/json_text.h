#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sbd {

/// The JSON text of `value`. Strings come from the network (probe errors, names from the
/// DCS, declaration comments): invalid UTF-8 in any of them becomes U+FFFD instead of
/// making nlohmann throw, which would turn /status, a log line or an API answer into an
/// error. `indent` as nlohmann's dump (-1: one line). Thread-safe.
inline std::string JsonText(const nlohmann::json& value, int indent = -1) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace sbd
