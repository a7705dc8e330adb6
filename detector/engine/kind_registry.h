#pragma once

// The built-in kinds as the engine builds them, from each kind's descriptor (probes/kind.h,
// listed once in probes/kinds/kinds.cpp): the probe of its members, the lock store that keeps its
// record and where that is, its members' managers. The engine and the output see only the
// interfaces below.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "probes/probe.h"

namespace sbd {

/// Builds the probe for one member of a cluster; the scheduler owns what it returns.
using ProbeFactory =
    std::function<std::unique_ptr<MemberProbe>(const ClusterSpec&, const MemberSpec&)>;

/// The default factory: the member probe of the cluster's kind, from its descriptor (a
/// PostgresAsyncProbe for postgres and the PostgreSQL managers, a RedisProbe for redis...).
ProbeFactory BuiltInMemberProbeFactory();

/// The kinds the engine builds, in the list's order: the kinds the config parses (one list,
/// probes/kinds/kinds.cpp).
std::vector<std::string> BuiltInKindNames();

/// Builds the lock store of a cluster, or nullptr when its kind keeps no lock record (plain
/// PostgreSQL); the scheduler owns what it returns.
using LockStoreFactory = std::function<std::unique_ptr<LockStore>(const ClusterSpec&)>;

/// The default factory: the lock store the cluster's built-in kind registers (etcd's
/// EtcdScopeProbe for Patroni), none for a kind that keeps no record.
LockStoreFactory BuiltInLockStoreFactory();

/// Builds the manager probe of one member, or nullptr when it has none (no REST URL known);
/// called again when discovery learns a configured member's URL. The scheduler owns it.
using ManagerProbeFactory =
    std::function<std::unique_ptr<ManagerProbe>(const ClusterSpec&, const MemberSpec&)>;

/// The default factory: the manager probe of the cluster's kind, from its descriptor (Patroni's
/// REST API at the member's patroni_url, when it has one); none for a kind without managers.
ManagerProbeFactory BuiltInManagerProbeFactory();

/// How the scheduler builds every reading of a cluster: the built-in kinds by default, fakes
/// in tests. Plain value type.
struct ProbeFactories {
  ProbeFactory members = BuiltInMemberProbeFactory();
  LockStoreFactory lock_stores = BuiltInLockStoreFactory();
  ManagerProbeFactory managers = BuiltInManagerProbeFactory();
};

/// What a cluster's lock is made of, as the scheduler built it. Metrics, status and alerts
/// decide from this which series, fields and alerts a cluster has, never from its kind.
/// Plain value type.
struct LockDescription {
  /// The kind's name as the config spells it ("postgres", "patroni"): shown, never compared.
  std::string kind;
  /// True when a lock store keeps the record: its answers are in the snapshot's `last_dcs`,
  /// and each member holds the lock or not. False when the members' claims are all there is.
  bool has_store = false;
  /// Where the store keeps the record, for people ("/service/orders/leader"); empty without
  /// a store.
  std::string record;
};

/// The lock of a cluster built with `has_store` (what its lock store factory returned): the
/// kind's name and where its store keeps the record, from the kind's descriptor.
LockDescription DescribeLock(const ClusterSpec& spec, bool has_store);

}  // namespace sbd
