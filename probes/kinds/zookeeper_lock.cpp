// The zookeeper_lock kind: A ZooKeeper lock (kazoo's and Curator's recipe): the lock path's
// children are the record, each candidate's metrics endpoint its claim.
#include "probes/zookeeper_lock.h"

#include "probes/kind.h"
#include "probes/lease_adapters.h"

namespace sbd {
namespace {

std::unique_ptr<MemberProbe> ZooKeeperClaimMember(const ClusterSpec& spec,
                                                  const MemberSpec& member) {
  return std::make_unique<LeaseClaimProbe>(member, ClaimQueryOf(spec.zookeeper_lock));
}

std::unique_ptr<LockStore> ZooKeeperChildrenStore(const ClusterSpec& spec) {
  return std::make_unique<ZooKeeperLockStore>(spec);
}

std::string ZooKeeperChildrenRecord(const ClusterSpec& spec) {
  return ZooKeeperLockRecord(spec.zookeeper_lock);
}

}  // namespace

KindDescriptor ZooKeeperLockKind() {
  KindDescriptor kind;
  kind.config.name = "zookeeper_lock";
  kind.config.claims_only = true;
  kind.config.block = "zookeeper_lock";
  kind.config.parse = ParseZooKeeperLock;
  kind.config.parse_member = ParseClaimMember;
  kind.config.words = &kLockWords;
  kind.config.remediation = RemediationSupport::kHook;
  kind.member = ZooKeeperClaimMember;
  kind.store = ZooKeeperChildrenStore;
  kind.record = ZooKeeperChildrenRecord;
  return kind;
}

}  // namespace sbd
