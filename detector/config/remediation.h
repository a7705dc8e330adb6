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

/// A cluster's `remediation:` block. Plain value type.
struct RemediationSpec {
  RemediationMode mode = RemediationMode::kOff;
  /// The fencing role (PostgreSQL kinds): the probe's role stays read-only.
  std::string user;
  std::optional<std::string> password_file;
  std::optional<std::string> password_env;
  /// Bounds each step of an action (connect, each statement, the check).
  std::chrono::milliseconds timeout{3000};
};

/// The top-level `remediation:` block: a fleet-wide cap, so that no bug and no hostile lock
/// store can fence a fleet. Plain value type.
struct RemediationLimits {
  int max_fences = 2;                        ///< at most this many fences ...
  std::chrono::milliseconds window{600000};  ///< ... in any window this long, every cluster
};

}  // namespace sbd
