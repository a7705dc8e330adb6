#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "detector/config/config_error.h"

namespace sbd {

/// Text checks and key paths shared by the config's readers (the parser and the kinds').
namespace cfg {

bool IsDigit(char c);
bool IsLetter(char c);
/// "path.key", or "key" at the top.
std::string Join(const std::string& path, const std::string& key);
/// "path[i]".
std::string Index(const std::string& path, size_t i);
/// Letters, digits, '_', '.' and '-'.
bool IsName(const std::string& s);
bool IsEnvName(const std::string& s);
/// Prometheus' label name syntax, [a-zA-Z_][a-zA-Z0-9_]*.
bool IsLabelName(const std::string& s);
bool StartsWith(const std::string& s, const std::string& prefix);
/// http(s)://host[:port][/path]: a scheme the HTTP clients speak, a host, and no whitespace.
bool IsHttpUrl(const std::string& s);
/// A Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or, without `metric`, a label name.
bool IsPrometheusName(const std::string& s, bool metric);
/// Base URLs and the DCS namespace get paths appended with a '/' of their own.
std::string TrimTrailingSlashes(std::string s);
/// "a", "a and b", "a, b and c".
std::string JoinWords(const std::vector<std::string>& words);
/// A duration as ParseDuration reads it, zero accepted (so that callers can say "below the
/// minimum" rather than "malformed").
std::optional<Millis> ParseDurationOrZero(const std::string& text);

}  // namespace cfg

/// A libpq connection string as libpq's own parser read it, without its password.
struct ParsedDsn {
  std::string dsn;
  std::string address;
  std::optional<std::string> password;
  /// Every keyword given a non-empty value, password included.
  std::set<std::string> keywords;
};

/// The config's generic YAML readers. Each reports its own errors, as
/// ConfigError{file, line, column, key path, message}, and returns nullopt/false/nullptr on
/// failure, so that a caller goes on to the next key and every error of a file is reported at
/// once. Not thread-safe; one reader per file parsed.
class ConfigReader {
 public:
  /// A mapping's key and its value.
  struct Entry {
    YAML::Node key;
    YAML::Node value;
    /// A null value's mark points at the next token, so errors about it go to the key.
    YAML::Mark Mark() const { return value.IsNull() ? key.Mark() : value.Mark(); }
  };
  using Fields = std::map<std::string, Entry>;
  /// Names seen so far and the line each was first seen at.
  using SeenNames = std::map<std::string, int>;

  /// A duration key's outcome.
  struct Timing {
    bool ok = true;  ///< false once an error was reported, so no further checks pile on
    std::optional<Millis> given;
    YAML::Mark mark;
  };

  explicit ConfigReader(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  /// The errors so far, in the order reported.
  std::vector<ConfigError>& errors() { return errors_; }

  /// A sequence item as an Entry, so that the value readers work on it.
  static Entry Item(const YAML::Node& node) { return {node, node}; }

  void AddError(const YAML::Mark& mark, std::string key, std::string message);

  /// The keys of a mapping, each of them in `allowed`, none twice.
  std::optional<Fields> ReadMapping(const YAML::Node& node, const std::string& path,
                                    const std::vector<std::string>& allowed);
  /// A nested mapping under a key; when the value is null the error goes to the key.
  std::optional<Fields> ReadMapping(const Entry& entry, const std::string& path,
                                    const std::vector<std::string>& allowed);

  const Entry* Required(const Fields& fields, const YAML::Node& parent, const std::string& path,
                        const std::string& key);
  static const Entry* Optional(const Fields& fields, const std::string& key);

  std::optional<std::string> String(const Entry& entry, const std::string& path);
  /// YAML 1.2 core booleans only, so that "yes", "on" or "y" cannot slip through.
  std::optional<bool> Bool(const Entry& entry, const std::string& path);
  std::optional<std::string> ValidName(const Entry& entry, const std::string& path);
  /// A valid name not yet in `seen` (`kind` names what it names: "cluster", "member").
  std::optional<std::string> Name(const Entry& entry, const std::string& path, SeenNames& seen,
                                  const char* kind);
  /// An http:// or https:// URL; with `trim`, stored without trailing '/' so that paths can be
  /// appended to it.
  std::optional<std::string> HttpUrl(const Entry& entry, const std::string& path, bool trim);
  bool Sequence(const Entry& entry, const std::string& path);
  bool NonEmptySequence(const Entry& entry, const std::string& path, const char* item);
  /// The optional duration `key`, at least `minimum`.
  Timing Duration(const Fields& fields, const std::string& path, const std::string& key,
                  Millis minimum);
  /// A whole number in [minimum, maximum].
  std::optional<int> Count(const Entry& entry, const std::string& path, int minimum, int maximum);
  /// password_file and password_env: a non-empty path and a valid variable name respectively.
  std::optional<std::string> PasswordSource(const Fields& fields, const std::string& path,
                                            const std::string& key);
  /// Both password sources of a member or a discovery block (`prefix` "sentinel_" for the
  /// sentinels' own); at most one may be set.
  void PasswordSources(const Fields& fields, const std::string& path,
                       std::optional<std::string>& file, std::optional<std::string>& env,
                       const std::string& prefix = "");
  /// A libpq connection string, checked by libpq's own parser.
  std::optional<ParsedDsn> Dsn(const Entry& entry, const std::string& path);
  /// libpq settings for members whose host and port come from elsewhere (`from` says where):
  /// the dsn may not set them, and the password must come from a file or the environment.
  std::string HostlessDsn(const Entry* dsn, const std::string& dsn_path, const char* from);

 private:
  std::string file_;
  std::vector<ConfigError> errors_;
};

}  // namespace sbd
