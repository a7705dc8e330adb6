#pragma once

// The opt-in remediation's settings (docs/remediation.md): per cluster, whether the detector may
// act on a confirmed zombie and as whom; for the fleet, how many fences it may make per window.

#include <chrono>
#include <optional>
#include <string>

namespace sbd {

/// What a cluster's `remediation.mode` allows.
enum class RemediationMode {
  kOff,     ///< no block: nothing is ever done, no write connection is ever opened
  kDryRun,  ///< says and records what it would have done
  kFence,   ///< fences the zombie
};

/// Stable snake_case name ("off", "dry_run", "fence").
const char* RemediationModeName(RemediationMode mode);

/// The operator's hook that fences a process the detector cannot reach itself (the lease and
/// election kinds): a POST of the evidence as JSON. Plain value type; the token is never shown.
struct RemediationHookSpec {
  std::string url;                        ///< http:// or https://, without credentials
  std::optional<std::string> token_file;  ///< "Authorization: Bearer <token>" from a file ...
  std::optional<std::string> token_env;   ///< ... or from the environment; at most one
  std::string ca_file;                    ///< https: the CA the hook's certificate chains to
};

/// A cluster's `remediation:` block. Plain value type.
struct RemediationSpec {
  RemediationMode mode = RemediationMode::kOff;
  /// The fencing role (PostgreSQL kinds): the probe's role stays read-only.
  std::string user;
  std::optional<std::string> password_file;
  std::optional<std::string> password_env;
  /// The lease and election kinds: whom `mode: fence` asks to stop the zombie.
  std::optional<RemediationHookSpec> hook;
  /// Bounds each step of an action (connect, each statement, the check; a hook's whole call).
  std::chrono::milliseconds timeout{3000};
};

/// The top-level `remediation:` block: a fleet-wide cap, so that no bug and no hostile lock
/// store can fence a fleet. Plain value type.
struct RemediationLimits {
  int max_fences = 2;                        ///< at most this many fences ...
  std::chrono::milliseconds window{600000};  ///< ... in any window this long, every cluster
};

}  // namespace sbd
