// The redis kind: Redis servers under Sentinel: the sentinels' vote on the master is the record.
#include "probes/redis.h"

#include "probes/kind.h"
#include "probes/sentinel.h"

namespace sbd {
namespace {

std::unique_ptr<MemberProbe> RedisMember(const ClusterSpec& spec, const MemberSpec& member) {
  return std::make_unique<RedisProbe>(member, spec.redis.username, spec.redis.tls);
}

std::unique_ptr<LockStore> RedisSentinelStore(const ClusterSpec& spec) {
  return std::make_unique<SentinelStore>(
      spec.redis.sentinels, spec.redis.master_name, spec.members,
      SentinelAuth{spec.redis.sentinel_username, spec.redis.sentinel_password_file,
                   spec.redis.sentinel_password_env, spec.redis.tls});
}

std::string RedisSentinelRecord(const ClusterSpec& spec) {
  return "Sentinel's master " + spec.redis.master_name;
}

}  // namespace

KindDescriptor RedisKind() {
  KindDescriptor kind;
  kind.config.name = "redis";
  kind.config.claims_only = true;
  kind.config.block = "redis";
  kind.config.parse = ParseRedis;
  kind.config.parse_member = ParseRedisMember;
  kind.config.words = &kWritableWords;
  kind.config.remediation = RemediationSupport::kRedisFence;
  kind.member = RedisMember;
  kind.store = RedisSentinelStore;
  kind.record = RedisSentinelRecord;
  return kind;
}

}  // namespace sbd
