#pragma once

#include <optional>
#include <string>

namespace sbd {

/// Standard base64 (with padding), as etcd's JSON gateway uses for keys and values and HTTP
/// basic auth for credentials. Thread-safe.
std::string Base64Encode(const std::string& bytes);
/// Decodes standard base64 strictly (alphabet and padding checked); nullopt when malformed.
std::optional<std::string> Base64Decode(const std::string& text);

}  // namespace sbd
