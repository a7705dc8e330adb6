// The list of kinds: each once, in the order the config reads their blocks (the first,
// postgres, is the default). A new kind is its descriptor, probes/kinds/<kind>.cpp, and its
// line here (its probes, its config parser and its tests, rules, runbooks and docs aside).
#include "probes/kind.h"

namespace sbd {

KindDescriptor PostgresKind();        // probes/kinds/postgres.cpp
KindDescriptor PatroniKind();         // probes/kinds/patroni.cpp
KindDescriptor RedisKind();           // probes/kinds/redis.cpp
KindDescriptor RedisLeaseKind();      // probes/kinds/redis_lease.cpp
KindDescriptor K8sLeaseKind();        // probes/kinds/k8s_lease.cpp
KindDescriptor EtcdElectionKind();    // probes/kinds/etcd_election.cpp
KindDescriptor ZooKeeperLockKind();   // probes/kinds/zookeeper_lock.cpp
KindDescriptor PgAutoFailoverKind();  // probes/kinds/pg_auto_failover.cpp
KindDescriptor RepmgrKind();          // probes/kinds/repmgr.cpp

const std::vector<KindDescriptor>& KindDescriptors() {
  static const std::vector<KindDescriptor> kinds = {
      PostgresKind(),      PatroniKind(),        RedisKind(),
      RedisLeaseKind(),    K8sLeaseKind(),       EtcdElectionKind(),
      ZooKeeperLockKind(), PgAutoFailoverKind(), RepmgrKind(),
  };
  return kinds;
}

const KindDescriptor* FindKindDescriptor(const std::string& name) {
  for (const KindDescriptor& kind : KindDescriptors()) {
    if (name == kind.config.name) return &kind;
  }
  return nullptr;
}

// The config's view of the same list (detector/config/kinds/kinds.h): what it parses.
const std::vector<KindConfig>& Kinds() {
  static const std::vector<KindConfig> kinds = [] {
    std::vector<KindConfig> out;
    for (const KindDescriptor& kind : KindDescriptors()) out.push_back(kind.config);
    return out;
  }();
  return kinds;
}

}  // namespace sbd
