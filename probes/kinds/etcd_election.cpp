// The etcd_election kind: An etcd election or lock: the keys under its prefix are the record
// (the lowest create revision holds), each candidate's metrics endpoint its claim.
#include "probes/etcd_election.h"

#include "detector/common/logfmt.h"
#include "probes/kind.h"
#include "probes/lease_adapters.h"

namespace sbd {
namespace {

std::unique_ptr<MemberProbe> ElectionClaimMember(const ClusterSpec& spec,
                                                 const MemberSpec& member) {
  return std::make_unique<LeaseClaimProbe>(member, ClaimQueryOf(spec.etcd_election));
}

std::unique_ptr<LockStore> EtcdElectionKeyStore(const ClusterSpec& spec) {
  return std::make_unique<EtcdElectionStore>(spec);
}

std::string EtcdElectionRecord(const ClusterSpec& spec) {
  return "etcd keys under " + LogfmtEscape(ElectionKeyPrefix(spec.etcd_election.prefix)) +
         ", lowest create revision";
}

}  // namespace

KindDescriptor EtcdElectionKind() {
  KindDescriptor kind;
  kind.config.name = "etcd_election";
  kind.config.claims_only = true;
  kind.config.block = "etcd_election";
  kind.config.parse = ParseEtcdElection;
  kind.config.parse_member = ParseClaimMember;
  kind.config.words = &kLockWords;
  kind.config.remediation = RemediationSupport::kHook;
  kind.member = ElectionClaimMember;
  kind.store = EtcdElectionKeyStore;
  kind.record = EtcdElectionRecord;
  return kind;
}

}  // namespace sbd
