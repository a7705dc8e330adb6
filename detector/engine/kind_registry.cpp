#include "detector/engine/kind_registry.h"

#include "detector/common/logfmt.h"
#include "probes/etcd.h"
#include "probes/etcd_election.h"
#include "probes/k8s_lease.h"
#include "probes/lease_adapters.h"
#include "probes/patroni.h"
#include "probes/pg_auto_failover.h"
#include "probes/postgres_async.h"
#include "probes/redis.h"
#include "probes/repmgr.h"
#include "probes/sentinel.h"
#include "probes/zookeeper_lock.h"
#include "probes/zookeeper_scope.h"

namespace sbd {

namespace {

std::unique_ptr<LockStore> PatroniStore(const ClusterSpec& spec) {
  if (spec.patroni_zookeeper) return std::make_unique<ZooKeeperScopeStore>(spec);
  return std::make_unique<EtcdScopeProbe>(spec.etcd_endpoints, spec.dcs_namespace, spec.scope);
}

std::string PatroniLeaderKey(const ClusterSpec& spec) {
  return spec.dcs_namespace + "/" + spec.scope + "/leader";
}

std::unique_ptr<MemberProbe> PostgresMember(const ClusterSpec& spec, const MemberSpec& member) {
  return std::make_unique<PostgresAsyncProbe>(member, spec.probe_timeout);
}

std::unique_ptr<MemberProbe> RedisMember(const ClusterSpec& spec, const MemberSpec& member) {
  return std::make_unique<RedisProbe>(member, spec.redis.username, spec.redis.tls);
}

std::unique_ptr<LockStore> RedisSentinelStore(const ClusterSpec& spec) {
  return std::make_unique<SentinelStore>(
      spec.redis.sentinels, spec.redis.master_name, spec.members,
      SentinelAuth{spec.redis.sentinel_username, spec.redis.sentinel_password_file,
                   spec.redis.sentinel_password_env, spec.redis.tls});
}

std::unique_ptr<LockStore> RepmgrNodesStore(const ClusterSpec& spec) {
  return std::make_unique<RepmgrStore>(
      spec.members, spec.repmgr_database, spec.probe_timeout, EventLoop::Shared(),
      RepmgrDiscoverySettings{spec.discovery, spec.repmgr_seeds}, spec.repmgr_witness);
}

std::string RepmgrNodesRecord(const ClusterSpec& spec) {
  return "repmgr.nodes in each member's database " + spec.repmgr_database +
         (spec.repmgr_witness ? " and the witness's" : "");
}

std::string RedisSentinelRecord(const ClusterSpec& spec) {
  return "Sentinel's master " + spec.redis.master_name;
}

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

std::unique_ptr<MemberProbe> K8sLeaseClaimMember(const ClusterSpec& spec,
                                                 const MemberSpec& member) {
  return std::make_unique<LeaseClaimProbe>(member, ClaimQueryOf(spec.k8s_lease));
}

std::unique_ptr<LockStore> K8sLeaseObjectStore(const ClusterSpec& spec) {
  return std::make_unique<K8sLeaseStore>(spec);
}

std::string K8sLeaseObjectRecord(const ClusterSpec& spec) { return K8sLeaseRecord(spec.k8s_lease); }
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

std::unique_ptr<LockStore> PgAutoFailoverMonitorStore(const ClusterSpec& spec) {
  return std::make_unique<PgAutoFailoverStore>(spec);
}

std::string PgAutoFailoverMonitorRecord(const ClusterSpec& spec) {
  return PgAutoFailoverRecord(spec.pg_auto_failover);
}

// A built-in kind: the name the config spells, the probe of its members, the lock store that
// keeps its record (none when the members' claims are all there is) and where that store
// keeps it.
struct BuiltInKind {
  const char* name;
  std::unique_ptr<MemberProbe> (*member)(const ClusterSpec&, const MemberSpec&);
  std::unique_ptr<LockStore> (*store)(const ClusterSpec&);
  std::string (*record)(const ClusterSpec&);
};

// The registry of built-in kinds, one line each, keyed by the name `kind:` spells (the config's
// table, detector/config/kinds/kinds.cpp): the only place below the config that tells kinds
// apart. Everything else sees what a cluster has (a store, a scope, managers).
constexpr BuiltInKind kBuiltInKinds[] = {
    {"postgres", PostgresMember, nullptr, nullptr},
    {"patroni", PostgresMember, PatroniStore, PatroniLeaderKey},
    {"redis", RedisMember, RedisSentinelStore, RedisSentinelRecord},
    {"redis_lease", LeaseClaimMember, RedisLeaseKeyStore, RedisLeaseRecord},
    {"k8s_lease", K8sLeaseClaimMember, K8sLeaseObjectStore, K8sLeaseObjectRecord},
    {"etcd_election", ElectionClaimMember, EtcdElectionKeyStore, EtcdElectionRecord},
    {"zookeeper_lock", ZooKeeperClaimMember, ZooKeeperChildrenStore, ZooKeeperChildrenRecord},
    {"pg_auto_failover", PostgresMember, PgAutoFailoverMonitorStore, PgAutoFailoverMonitorRecord},
    {"repmgr", PostgresMember, RepmgrNodesStore, RepmgrNodesRecord},
};

const BuiltInKind& BuiltInKindOf(const ClusterSpec& spec) {
  for (const BuiltInKind& kind : kBuiltInKinds) {
    if (spec.kind == kind.name) return kind;
  }
  // A kind the config parses but nobody registered: it keeps no record, and its name says so.
  static constexpr BuiltInKind kUnregistered{"unregistered", PostgresMember, nullptr, nullptr};
  return kUnregistered;
}

}  // namespace

std::vector<std::string> BuiltInKindNames() {
  std::vector<std::string> names;
  for (const BuiltInKind& kind : kBuiltInKinds) names.emplace_back(kind.name);
  return names;
}

ProbeFactory BuiltInMemberProbeFactory() {
  return [](const ClusterSpec& cluster, const MemberSpec& member) {
    return BuiltInKindOf(cluster).member(cluster, member);
  };
}

ProbeFactory PostgresProbeFactory() {
  return [](const ClusterSpec& cluster, const MemberSpec& member) {
    return std::make_unique<PostgresAsyncProbe>(member, cluster.probe_timeout);
  };
}

LockStoreFactory BuiltInLockStoreFactory() {
  return [](const ClusterSpec& spec) -> std::unique_ptr<LockStore> {
    const BuiltInKind& kind = BuiltInKindOf(spec);
    return kind.store != nullptr ? kind.store(spec) : nullptr;
  };
}

LockDescription DescribeLock(const ClusterSpec& spec, bool has_store) {
  const BuiltInKind& kind = BuiltInKindOf(spec);
  LockDescription lock;
  lock.kind = kind.name;
  lock.has_store = has_store;
  if (has_store && kind.record != nullptr) lock.record = kind.record(spec);
  return lock;
}

ManagerProbeFactory PatroniManagerProbeFactory() {
  return [](const ClusterSpec&, const MemberSpec& member) -> std::unique_ptr<ManagerProbe> {
    if (member.patroni_url.empty()) return nullptr;
    return std::make_unique<PatroniRestProbe>(member.patroni_url);
  };
}

}  // namespace sbd
