// Provisioning declarations: "this cluster (or scope, or member) is being built, rebuilt, cut
// over or retired, for this reason, until then". The only input a human gives the suppressors.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config_error.h"

namespace sbd {

using WallTime = std::chrono::system_clock::time_point;

enum class DeclarationKind { kProvisioning, kRebuilding, kCutover, kDecommissioning };

/// Stable snake_case name ("provisioning", ...).
const char* DeclarationKindName(DeclarationKind kind);

/// One declaration. Plain value type.
struct Declaration {
  std::string id;  ///< unique: "config-N", the drop-in file name, or "api-<hex>"
  DeclarationKind kind = DeclarationKind::kProvisioning;
  std::string cluster;  ///< the detector's cluster name
  std::string scope;    ///< optional: only members whose Patroni claims this scope
  std::string member;   ///< optional: only this member
  std::string reason;
  std::string author;
  std::string source;  ///< "config", "file" or "api"
  std::string origin;  ///< where it came from: the config or drop-in file path, or "api"
  WallTime created{};
  WallTime expires{};

  bool ActiveAt(WallTime now) const { return now < expires; }
  /// True when the declaration is for `cluster` and covers a member with this name that
  /// claims `claimed_scope` ("" when unknown; the cluster's own scope is `cluster_scope`).
  bool CoversMember(const std::string& cluster_name, const std::string& cluster_scope,
                    const std::string& member_name, const std::string& claimed_scope) const;
  /// True when it covers the whole cluster (no member; no scope, or the cluster's own).
  bool CoversCluster(const std::string& cluster_name, const std::string& cluster_scope) const;
  /// "provisioning of pg-main (scope v17) by alice: <reason>, until <time>".
  std::string Describe() const;
};

/// Longest `reason` accepted, in bytes: one line of text.
constexpr size_t kMaxReasonBytes = 500;
/// Longest `author` accepted, in bytes.
constexpr size_t kMaxAuthorBytes = 256;

/// Options for ParseDeclaration.
struct DeclarationRules {
  std::chrono::milliseconds max_duration{std::chrono::hours(24)};
  /// When the declaration is made: `created`, and the start of max_duration (for the state
  /// file, the earlier of this and its `created`).
  WallTime now{};
  /// The HTTP API accepts `duration` as well as `expires`; files must give `expires`, so that
  /// re-reading a file never extends it.
  bool allow_duration = false;
  /// The state file carries `id` and `created`.
  bool allow_identity = false;
  /// Accept a declaration that has already expired (the state file, config): it is kept,
  /// shown, and suppresses nothing.
  bool allow_expired = false;
  /// The authenticated HTTP user: replaces the document's `author`, which is then optional.
  std::optional<std::string> author;
};

/// Parses one declaration mapping; `path` prefixes keys in errors ("suppressions.declarations[0]").
/// Reports every problem with file, line and column.
std::variant<Declaration, std::vector<ConfigError>> ParseDeclaration(const YAML::Node& node,
                                                                     const std::string& file,
                                                                     const std::string& path,
                                                                     const DeclarationRules& rules);

/// Parses a whole document holding one declaration (a drop-in file, an API body in JSON).
std::variant<Declaration, std::vector<ConfigError>> ParseDeclarationText(
    const std::string& text, const std::string& file, const DeclarationRules& rules);

/// RFC 3339 timestamps ("2026-11-30T06:00:00Z", "...+02:00", fractional seconds allowed).
/// A time WallTime cannot hold (before 1970, after 2262) is not one.
std::optional<WallTime> ParseRfc3339(const std::string& text);
/// `t + d`, or WallTime::max() where that would overflow. Pure.
WallTime AddSaturating(WallTime t, std::chrono::milliseconds d);
/// UTC, seconds precision: "2026-11-30T06:00:00Z".
std::string FormatRfc3339(WallTime t);

}  // namespace sbd
