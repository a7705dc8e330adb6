#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace sbd {

/// The --web.config.file settings, in the Prometheus exporter-toolkit format
/// (tls_server_config.cert_file/key_file, basic_auth_users: name -> bcrypt hash).
struct WebConfig {
  std::string cert_file;
  std::string key_file;
  std::vector<std::pair<std::string, std::string>> basic_auth_users;
};

/// Reads a web config file strictly; every error is "file:line:column: key: message", and no
/// content of the file makes it throw.
std::variant<WebConfig, std::vector<std::string>> LoadWebConfig(const std::string& path);

/// Checks HTTP basic credentials against bcrypt hashes. A right password is remembered (as a
/// SHA-256 digest) for a bounded time, so a scrape pays bcrypt once in a while, not every
/// time; an unknown user costs one bcrypt against a dummy hash of the configured cost, so it
/// answers as slowly as a known user with a wrong password. Thread-safe; bcrypt runs one at a
/// time, so wrong passwords cost at most one core.
class BasicAuth {
 public:
  /// `users` as in WebConfig; empty means no authentication.
  explicit BasicAuth(std::vector<std::pair<std::string, std::string>> users);

  /// True when users are configured.
  bool enabled() const { return !users_.empty(); }
  /// The user name when `authorization_header` carries a configured user's right password.
  std::optional<std::string> Verify(const std::string& authorization_header) const;

  /// How long a right password is remembered, and how many are.
  static constexpr std::chrono::minutes kCacheTtl{5};
  static constexpr size_t kCacheMaxEntries = 256;

 private:
  bool Bcrypt(const std::string& password, const std::string& hash) const;

  std::map<std::string, std::string> users_;
  std::string dummy_hash_;
  mutable std::mutex bcrypt_mu_;
  mutable std::mutex cache_mu_;
  /// user + '\0' + sha256(password) -> when the entry expires.
  mutable std::map<std::string, std::chrono::steady_clock::time_point> cache_;
};

}  // namespace sbd
