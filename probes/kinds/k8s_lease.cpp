// The k8s_lease kind: A Kubernetes Lease: the Lease object is the record, each candidate's
// metrics endpoint its claim.
#include "probes/k8s_lease.h"

#include "probes/kind.h"
#include "probes/lease_adapters.h"

namespace sbd {
namespace {

std::unique_ptr<MemberProbe> K8sLeaseClaimMember(const ClusterSpec& spec,
                                                 const MemberSpec& member) {
  return std::make_unique<LeaseClaimProbe>(member, ClaimQueryOf(spec.k8s_lease));
}

std::unique_ptr<LockStore> K8sLeaseObjectStore(const ClusterSpec& spec) {
  return std::make_unique<K8sLeaseStore>(spec);
}

std::string K8sLeaseObjectRecord(const ClusterSpec& spec) { return K8sLeaseRecord(spec.k8s_lease); }

}  // namespace

KindDescriptor K8sLeaseKind() {
  KindDescriptor kind;
  kind.config.name = "k8s_lease";
  kind.config.claims_only = true;
  kind.config.block = "k8s_lease";
  kind.config.parse = ParseK8sLease;
  kind.config.parse_member = ParseClaimMember;
  kind.config.words = &kLeaseWords;
  kind.config.remediation = RemediationSupport::kHook;
  kind.member = K8sLeaseClaimMember;
  kind.store = K8sLeaseObjectStore;
  kind.record = K8sLeaseObjectRecord;
  return kind;
}

}  // namespace sbd
