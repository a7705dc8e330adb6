// The redis_lease kind: An application lease, a Redis key with a TTL: the key is the record,
// each candidate's metrics endpoint its claim.
#include "detector/common/logfmt.h"
#include "probes/kind.h"
#include "probes/lease_adapters.h"

namespace sbd {
namespace {

std::unique_ptr<MemberProbe> LeaseClaimMember(const ClusterSpec& spec, const MemberSpec& member) {
  return std::make_unique<LeaseClaimProbe>(spec, member);
}

std::unique_ptr<LockStore> RedisLeaseKeyStore(const ClusterSpec& spec) {
  return std::make_unique<RedisLeaseStore>(spec);
}

std::string RedisLeaseRecord(const ClusterSpec& spec) {
  const RedisLeaseSpec& lease = spec.redis_lease;
  return "Redis " + lease.address + " " +
         (lease.pattern.empty() ? "key " + LogfmtEscape(lease.key)
                                : "keys matching " + LogfmtEscape(lease.pattern));
}

}  // namespace

KindDescriptor RedisLeaseKind() {
  KindDescriptor kind;
  kind.config.name = "redis_lease";
  kind.config.claims_only = true;
  kind.config.block = "redis_lease";
  kind.config.parse = ParseRedisLease;
  kind.config.parse_member = ParseClaimMember;
  kind.config.words = &kLeaseWords;
  kind.config.remediation = RemediationSupport::kHook;
  kind.member = LeaseClaimMember;
  kind.store = RedisLeaseKeyStore;
  kind.record = RedisLeaseRecord;
  return kind;
}

}  // namespace sbd
