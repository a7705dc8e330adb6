#pragma once

// One lock kind, whole: what the config reads for it (its KindConfig: name, block and keys,
// parsers, the words for its claim, what remediation may do) and what the engine builds of it
// (its members' probe, the lock store that keeps its record and where that is, its members'
// manager probe). Each kind's descriptor is its own file, probes/kinds/<kind>.cpp; the list in
// probes/kinds/kinds.cpp names each once, and is the only list of kinds: the config parses the
// kinds it lists (Kinds(), detector/config/kinds/kinds.h, is defined there) and the engine
// builds them (detector/engine/kind_registry.cpp). Everything else sees what a cluster has (a
// store, a scope, managers) through the interfaces of probes/probe.h.

#include <memory>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "detector/config/kinds/kinds.h"
#include "probes/probe.h"

namespace sbd {

struct KindDescriptor {
  /// What the config reads: `config.name` is the name `kind:` spells.
  KindConfig config;
  /// The probe of one member; never null.
  std::unique_ptr<MemberProbe> (*member)(const ClusterSpec&, const MemberSpec&) = nullptr;
  /// The lock store that keeps the lock's record; null when the members' claims are all there
  /// is (plain PostgreSQL).
  std::unique_ptr<LockStore> (*store)(const ClusterSpec&) = nullptr;
  /// Where the store keeps the record, for people ("/service/orders/leader"); null without a
  /// store.
  std::string (*record)(const ClusterSpec&) = nullptr;
  /// The probe of a member's manager (Patroni's REST API), or nullptr when the member has none;
  /// null when the kind has no manager to read.
  std::unique_ptr<ManagerProbe> (*manager)(const ClusterSpec&, const MemberSpec&) = nullptr;
};

/// Every kind, in the order the config reads their blocks; the first is the default (postgres).
const std::vector<KindDescriptor>& KindDescriptors();

/// The kind `kind:` names, or nullptr.
const KindDescriptor* FindKindDescriptor(const std::string& name);

}  // namespace sbd
