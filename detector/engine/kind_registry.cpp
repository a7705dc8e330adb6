#include "detector/engine/kind_registry.h"

#include "probes/kind.h"

namespace sbd {

namespace {

// The descriptor of the cluster's kind (probes/kinds/kinds.cpp lists every kind the config
// parses); the default kind's for one nobody lists (a spec built by hand).
const KindDescriptor& KindOf(const ClusterSpec& spec) {
  const KindDescriptor* kind = FindKindDescriptor(spec.kind);
  return kind != nullptr ? *kind : KindDescriptors().front();
}

}  // namespace

std::vector<std::string> BuiltInKindNames() {
  std::vector<std::string> names;
  for (const KindDescriptor& kind : KindDescriptors()) names.emplace_back(kind.config.name);
  return names;
}

ProbeFactory BuiltInMemberProbeFactory() {
  return [](const ClusterSpec& cluster, const MemberSpec& member) {
    return KindOf(cluster).member(cluster, member);
  };
}

LockStoreFactory BuiltInLockStoreFactory() {
  return [](const ClusterSpec& spec) -> std::unique_ptr<LockStore> {
    const KindDescriptor& kind = KindOf(spec);
    return kind.store != nullptr ? kind.store(spec) : nullptr;
  };
}

ManagerProbeFactory BuiltInManagerProbeFactory() {
  return [](const ClusterSpec& spec, const MemberSpec& member) -> std::unique_ptr<ManagerProbe> {
    const KindDescriptor& kind = KindOf(spec);
    return kind.manager != nullptr ? kind.manager(spec, member) : nullptr;
  };
}

LockDescription DescribeLock(const ClusterSpec& spec, bool has_store) {
  const KindDescriptor* kind = FindKindDescriptor(spec.kind);
  LockDescription lock;
  // A kind nobody lists keeps no record, and its name says so.
  lock.kind = kind != nullptr ? kind->config.name : "unregistered";
  lock.has_store = has_store;
  if (has_store && kind != nullptr && kind->record != nullptr) lock.record = kind->record(spec);
  return lock;
}

}  // namespace sbd
