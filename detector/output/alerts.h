#pragma once

#include <map>
#include <string>
#include <vector>

#include "detector/alerting/alert_pusher.h"
#include "detector/config/config.h"
#include "detector/engine/cluster_state.h"

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

/// The labels of an alert named `alertname` that the detector sends for the cluster `spec`
/// whose lock the scheduler describes as `lock_kind`: the external labels, then alertname,
/// severity, cluster, scope (when set) and lock_kind (when known). Every alert is built with
/// it. Pure; thread-safe.
std::map<std::string, std::string> AlertLabels(const ClusterSpec& spec,
                                               const std::string& lock_kind,
                                               const AlertingSpec& alerting,
                                               const std::string& alertname,
                                               const std::string& severity);

/// The full label sets of every page (critical alert: SplitBrain, FencingTokenRegressed) the
/// detector may send for `spec`, built by AlertLabels: what a silence must not match
/// (suppressors/alertmanager_silences.h). Pure; thread-safe.
std::vector<std::map<std::string, std::string>> PageLabelSets(const ClusterSpec& spec,
                                                              const AlertingSpec& alerting);

/// The alerts a cluster's snapshot fires right now, with the labels the rules in rules/ use
/// too (alertname, severity, cluster, scope, lock_kind, plus external labels), so that Alertmanager
/// deduplicates the direct push against the rule path. Pure; thread-safe.
std::vector<Alert> AlertsFor(const ClusterSnapshot& cluster, const AlertingSpec& alerting,
                             const AlertLinks& links);

}  // namespace sbd
