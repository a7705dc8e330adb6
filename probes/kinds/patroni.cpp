// The patroni kind: PostgreSQL servers run by Patroni: the leader key of its scope in etcd (or
// ZooKeeper) is the record, each member's Patroni REST API its manager.
#include "probes/patroni.h"

#include "probes/etcd.h"
#include "probes/kind.h"
#include "probes/postgres_async.h"
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

std::unique_ptr<ManagerProbe> PatroniRest(const ClusterSpec&, const MemberSpec& member) {
  if (member.patroni_url.empty()) return nullptr;
  return std::make_unique<PatroniRestProbe>(member.patroni_url);
}

}  // namespace

KindDescriptor PatroniKind() {
  KindDescriptor kind;
  kind.config.name = "patroni";
  kind.config.patroni_urls = true;
  kind.config.keys = {"scope", "namespace", "etcd", "zookeeper", "discover", "discovery"};
  kind.config.parse = ParsePatroni;
  kind.config.parse_member = ParsePostgresMember;
  kind.config.words = &kWritableWords;
  kind.config.remediation = RemediationSupport::kPostgresFence;
  kind.member = PostgresMemberProbe;
  kind.store = PatroniStore;
  kind.record = PatroniLeaderKey;
  kind.manager = PatroniRest;
  return kind;
}

}  // namespace sbd
