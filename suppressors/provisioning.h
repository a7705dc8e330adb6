// provisioning: a human declares a cluster, a scope or a member `provisioning`, `rebuilding`,
// `cutover` or `decommissioning`, with a reason and a mandatory expiry. While the declaration
// is active, a finding whose every member it covers is suppressed: the verdict reads
// `suppressed`, the suppression is exported with its reason and expiry, and a confirmed split
// brain still raises the SplitBrainSuppressed warning. A declaration covers only its own
// cluster, scope and member: it never hides a finding elsewhere.
#pragma once

#include "suppressors/suppressor.h"

namespace sbd {

class ProvisioningSuppressor : public Suppressor {
 public:
  const char* name() const override { return "provisioning"; }
  void Apply(const SuppressionInput& in, Assessment& a) const override;
};

/// The members a verdict rests on: what a declaration must cover to suppress it.
std::vector<std::string> InvolvedMembers(const ClusterSpec& spec, const Assessment& a);

}  // namespace sbd
