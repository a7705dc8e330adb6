#pragma once

#include <string>
#include <vector>

#include "detector/alerting/alert_pusher.h"
#include "detector/config/config.h"
#include "detector/engine/scheduler.h"

namespace sbd {

/// Rounds a warning-level verdict must persist before its alert is pushed, so that a
/// failover's instant of "writable but not the holder" warns nobody. A confirmed split brain
/// needs no such wait: confirmation already filtered sampling skew.
constexpr std::uint64_t kWarningRounds = 3;

/// True when the cluster's warning-level verdict has persisted: kWarningRounds rounds that
/// span at least kWarningRounds - 1 probe intervals (less half an interval of jitter), so that
/// the fast rounds after a lock-store watch's wake never turn a transition into a warning.
/// Pure.
bool VerdictPersisted(const ClusterSnapshot& cluster);

/// Where alerts point back to.
struct AlertLinks {
  std::string generator_url;     ///< the detector's /status page
  std::string runbook_base_url;  ///< runbook file names are appended
};

/// The alerts a cluster's snapshot fires right now, with the labels the rules in rules/ use
/// too (alertname, severity, cluster, scope, lock_kind, plus external labels), so that Alertmanager
/// deduplicates the direct push against the rule path. Pure; thread-safe.
std::vector<Alert> AlertsFor(const ClusterSnapshot& cluster, const AlertingSpec& alerting,
                             const AlertLinks& links);

}  // namespace sbd
