#pragma once

#include <chrono>
#include <condition_variable>
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

/// What checking one request's credentials found. Plain value type.
struct AuthOutcome {
  std::optional<std::string> user;  ///< set when the credentials are right
  /// Not checked: bcrypt is busy with others and this request may not wait (answer 429 with
  /// Retry-After); never counted as a failure.
  bool shed = false;
};

/// Checks HTTP basic credentials against bcrypt hashes, so that wrong passwords cannot deny
/// service to right ones:
/// - a right password is remembered (user and the SHA-256 of the password) for a bounded
///   time, so a scrape pays bcrypt once in a while, never on every request;
/// - a wrong one is remembered too, so repeating it costs no bcrypt;
/// - bcrypt runs one at a time (wrong passwords cost at most one core); a request finding it
///   busy waits for it a short bounded time, with at most kMaxBcryptWaiters others, unless
///   its source failed recently: such sources share kSuspectRate bcrypts a second, only when
///   bcrypt is free, and are shed (429) otherwise;
/// - an unknown user costs one bcrypt against a dummy hash of the configured cost, so it
///   answers as slowly as a known user with a wrong password.
/// Every table is bounded. Thread-safe.
class BasicAuth {
 public:
  /// `users` as in WebConfig; empty means no authentication.
  explicit BasicAuth(std::vector<std::pair<std::string, std::string>> users);

  /// True when users are configured.
  bool enabled() const { return !users_.empty(); }
  /// Checks `authorization_header` from `source` (the client's address; "" when unknown).
  AuthOutcome Check(const std::string& authorization_header, const std::string& source) const;
  /// The user name when `authorization_header` carries a configured user's right password
  /// (waiting for bcrypt as long as it takes).
  std::optional<std::string> Verify(const std::string& authorization_header) const;

  /// How long a right password is remembered, and how many are.
  static constexpr std::chrono::minutes kCacheTtl{5};
  static constexpr size_t kCacheMaxEntries = 256;
  /// How long a wrong one is remembered, and how many are.
  static constexpr std::chrono::minutes kFailedTtl{1};
  static constexpr size_t kFailedMaxEntries = 4096;
  /// Requests that may wait for a busy bcrypt at once, and for how long.
  static constexpr size_t kMaxBcryptWaiters = 2;
  static constexpr std::chrono::milliseconds kBcryptWait{500};
  /// A source whose credentials failed within this long may not wait for bcrypt.
  static constexpr std::chrono::seconds kSuspectFor{30};
  /// bcrypt runs for such sources, all together, at most this many times a second.
  static constexpr int kSuspectRate = 4;
  static constexpr size_t kMaxSources = 4096;

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  /// Check, waiting for bcrypt as long as it takes when `patient`.
  AuthOutcome CheckAs(const std::string& header, const std::string& source, bool patient) const;
  /// Runs bcrypt; nullopt when it was busy past the wait allowed (see the class comment).
  std::optional<bool> Bcrypt(const std::string& password, const std::string& hash,
                             std::optional<TimePoint> wait_until) const;
  /// Remembers `key` in `table` until `until`, keeping it under `max` entries.
  static void Remember(std::map<std::string, TimePoint>& table, const std::string& key,
                       TimePoint until, size_t max);

  std::map<std::string, std::string> users_;
  std::string dummy_hash_;
  mutable std::mutex bcrypt_mu_;  ///< guards the two below
  mutable std::condition_variable bcrypt_cv_;
  mutable bool bcrypt_running_ = false;
  mutable size_t bcrypt_waiters_ = 0;
  mutable std::mutex cache_mu_;  ///< guards the three tables below
  /// user + '\0' + sha256(password) -> when the entry expires.
  mutable std::map<std::string, TimePoint> cache_;
  mutable std::map<std::string, TimePoint> failed_;
  /// source -> until when it may not wait for bcrypt.
  mutable std::map<std::string, TimePoint> suspects_;
  mutable TimePoint suspect_next_{};  ///< when a suspect may next run bcrypt
};

}  // namespace sbd
