#pragma once

// What the output shows of the opt-in remediation (detector/remediation/): its counters, the
// lines the page and the status add, and its JSON.

#include <prometheus/metric_family.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "detector/engine/cluster_state.h"

namespace sbd {

/// splitbrain_remediations_total{cluster,action,result} (every result at 0 once a cluster's
/// mode is on, so that increase() sees the first action) and splitbrain_remediation_mode.
std::vector<prometheus::MetricFamily> RemediationFamilies(
    const std::vector<ClusterSnapshot>& clusters);

/// The records of the cluster's open incident (since it opened), else of the last hour.
std::vector<RemediationRecord> RecentRemediations(const ClusterSnapshot& c);

/// One line per recent record: what was done (or would be), when, with what result, and the
/// undo; "" when there is none. Starts with a newline.
std::string RemediationEvidence(const ClusterSnapshot& c);

/// The status view's `remediation` object; null when the mode is off and nothing was done.
nlohmann::json RemediationJson(const RemediationView& view);

}  // namespace sbd
