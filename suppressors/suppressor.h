// The suppressor interface. A suppressor is pure: it decides from the round's observations,
// the cluster's history, the inventory and the active declarations, and does no I/O. It may
// lower a finding's verdict only by recording a Suppression (suppressor, reason, expiry), which
// is exported, listed in the status view and, for a split brain, still warns.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "detector/config/declaration.h"
#include "detector/verdicts/verdict.h"
#include "probes/probe.h"

namespace sbd {

/// A switchover or failover seen by the detector: either a candidate (two or more writable
/// members) whose confirmation failed because the re-probe saw the old primary demoted,
/// restarted or shutting down, or the primary found moved to another member since the last
/// round that had one.
struct TransitionEvidence {
  std::vector<std::string> members;  ///< the members involved
  std::string summary;               ///< what was seen, one clause per member
  bool from_candidate = false;       ///< a candidate that was kept from paging
  /// The lock store itself is moving the lock (DescribeHandover): for as long as that lasts
  /// the double holder is its own doing, suppressed rather than a persisting suspicion.
  bool from_store = false;
};

/// Everything a suppressor may look at.
struct SuppressionInput {
  const ClusterSpec& spec;
  const std::vector<Observation>& round;                ///< after confirmation
  const ClusterHistory& history;                        ///< already updated with the round
  const std::vector<Declaration>& declarations;         ///< active now, every cluster's
  const std::optional<TransitionEvidence>& transition;  ///< this round's, if any
  WallClock::time_point now;
  Millis ttl;  ///< the effective one: the lock store's when the config gives none
};

class Suppressor {
 public:
  virtual ~Suppressor() = default;
  /// The `suppressor` label: "provisioning", "label_regrouping", "transition".
  virtual const char* name() const = 0;
  /// Records its suppressions in `a.suppressions` and may lower `a.verdict` (never raise it).
  virtual void Apply(const SuppressionInput& in, Assessment& a) const = 0;
};

/// The registered suppressors, in the order they run (registry.cpp lists them explicitly).
const std::vector<std::unique_ptr<Suppressor>>& RegisteredSuppressors();

/// Runs every registered suppressor over the assessment.
void ApplySuppressors(const SuppressionInput& in, Assessment& a);

/// The scope a member claims in this round (its Patroni REST answer), else the last one it
/// claimed, else "".
std::string ClaimedScope(const SuppressionInput& in, const std::string& member);

}  // namespace sbd
