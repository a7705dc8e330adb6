#pragma once

// When the opt-in remediation may act (docs/remediation.md): a pure function of one round's
// assessment, so that every condition is tested without servers or threads.

#include <map>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "detector/verdicts/verdict.h"
#include "probes/probe.h"

namespace sbd {

/// What one round shows the gate. References only; valid for the call.
struct GateInput {
  const ClusterSpec& spec;
  const Assessment& assessment;           ///< after the suppressors
  const std::vector<Observation>& round;  ///< after confirmation
  bool undeclared_fork = false;           ///< the lineage is writable elsewhere too, undeclared
};

/// The gate's answer. Plain value type.
struct GateDecision {
  std::vector<std::string> targets;  ///< the zombies it may act on; empty: none
  std::string holder;                ///< the member the lock store names, read writable
  /// The claim tokens this round read for the holder and the targets, by member (none for a
  /// kind without tokens).
  std::map<std::string, std::string> tokens;
  /// Why nothing is done, while there is a finding (a split brain, suspected or suppressed)
  /// that an operator might expect an action for; empty otherwise.
  std::string hold;
};

/// Targets only when every condition holds at once: remediation on; a split brain confirmed
/// by the re-probe and not suppressed; not fenced by tokens; no token or revision gone back; no
/// undeclared fork; the lock store read in this round naming a holder that was itself read
/// writable; each target a zombie (writable, not the holder) read in this round.
GateDecision DecideRemediation(const GateInput& input);

/// True when a member the detector fenced (or is fencing) since `incident_opened`, per `records`
/// (RemediationView::records), is still a primary in `round`: PostgreSQL out of recovery
/// (read-only now), a Redis master (behind its guard). Such a member keeps the incident open.
template <typename Records>
bool FencedZombieStands(const Records& records, WallClock::time_point incident_opened,
                        const std::vector<Observation>& round);

/// Whether the member `obs` read is a primary, whatever its writes: PostgreSQL not in recovery,
/// a Redis master, a claimer.
bool ActsAsPrimary(const Observation& obs);

template <typename Records>
bool FencedZombieStands(const Records& records, WallClock::time_point incident_opened,
                        const std::vector<Observation>& round) {
  for (const auto& r : records) {
    if (r.requested < incident_opened || (r.result != "fenced" && r.result != "running")) continue;
    for (const Observation& obs : round) {
      if (obs.member == r.member && ActsAsPrimary(obs)) return true;
    }
  }
  return false;
}

}  // namespace sbd
