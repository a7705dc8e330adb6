#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace sbd {

using Millis = std::chrono::milliseconds;

/// One member of a cluster as the runtime sees it: a name and how to reach its PostgreSQL.
/// Plain value type; thread-safe to share once built.
struct MemberSpec {
  std::string name;
  /// libpq connection string without any password (validated by libpq's own parser).
  std::string dsn;
  /// host:port (or socket directory) for display; never contains a secret.
  std::string address;
  /// Where the password comes from, if anywhere: at most one of these is set.
  std::optional<std::string> password_file;
  std::optional<std::string> password_env;
  /// Password found inline in the DSN (allowed, never required, never logged or exported).
  std::optional<std::string> inline_password;
};

/// A cluster: members that share one lock and are expected to share one lineage.
struct ClusterSpec {
  std::string name;
  Millis ttl{30000};
  /// Default ttl/10; never above ttl/3.
  Millis probe_interval{3000};
  /// Default min(probe_interval, 2s); never above probe_interval.
  Millis probe_timeout{2000};
  /// Expected PostgreSQL system identifier; when empty the detector learns it from the
  /// majority of members it reads.
  std::string system_identifier;
  std::vector<MemberSpec> members;
};

/// A configuration that passed every check. The only config type the runtime accepts:
/// it can only be produced by LoadConfig/ParseConfig, so validation cannot be skipped.
class ValidatedConfig {
 public:
  const std::vector<ClusterSpec>& clusters() const { return clusters_; }
  const std::string& source() const { return source_; }

 private:
  friend class ConfigParser;
  ValidatedConfig() = default;
  std::vector<ClusterSpec> clusters_;
  std::string source_;
};

/// One problem in a config file: where it is and which key it concerns.
struct ConfigError {
  std::string file;
  int line = 0;     // 1-based; 0 when the file could not be read at all
  int column = 0;   // 1-based
  std::string key;  // dotted path, e.g. clusters[0].members[1].dsn
  std::string message;
  /// "file:line:column: key: message".
  std::string ToString() const;
};

using ConfigResult = std::variant<ValidatedConfig, std::vector<ConfigError>>;

/// Reads and validates a YAML config file; reports every error at once. Thread-safe.
ConfigResult LoadConfig(const std::string& path);

/// Validates YAML text; `file` is only used in error messages. Thread-safe.
ConfigResult ParseConfig(const std::string& yaml_text, const std::string& file);

/// Parses a Prometheus-style duration ("500ms", "2s", "1m30s"); nullopt when malformed
/// or not positive.
std::optional<Millis> ParseDuration(const std::string& text);

/// Formats a duration the way ParseDuration reads it ("1m30s", "250ms").
std::string FormatDuration(Millis d);

/// Resolves the member's password from its file or environment variable, or the inline
/// one. Returns an error message (never containing the secret) on failure.
std::variant<std::optional<std::string>, std::string> ResolvePassword(const MemberSpec& member);

}  // namespace sbd
