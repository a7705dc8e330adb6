#include "detector/config/kinds/kinds.h"
#include "detector/config/kinds/shared.h"

namespace sbd {

using namespace cfg;
using namespace kind_parsing;

namespace {

void ParseNamespace(ConfigReader& r, const Entry& entry, const std::string& path,
                    ClusterSpec& cluster) {
  const std::optional<std::string> text = r.String(entry, path);
  if (!text) return;
  if (!StartsWith(*text, "/")) {
    r.AddError(entry.Mark(), path, "expected a path starting with '/'");
    return;
  }
  // Patroni itself treats "/service" and "/service/" alike.
  cluster.dcs_namespace = TrimTrailingSlashes(*text);
}

void ParseEtcd(ConfigReader& r, const Entry& entry, const std::string& path, ClusterSpec& cluster) {
  const std::optional<Fields> fields = r.ReadMapping(entry, path, {"endpoints"});
  if (!fields) return;
  const Entry* endpoints = r.Required(*fields, entry.value, path, "endpoints");
  if (endpoints) cluster.etcd_endpoints = EtcdEndpoints(r, *endpoints, Join(path, "endpoints"));
}

// Patroni on ZooKeeper: the ensemble and the detector's session. A Patroni member's JSON is a few
// hundred bytes, its tags can make it more: the caps default larger than zookeeper_lock's.
void ParseZooKeeper(ConfigReader& r, const Entry& entry, const std::string& path,
                    ClusterSpec& cluster) {
  const std::optional<Fields> fields = r.ReadMapping(
      entry, path, {"hosts", "session_timeout", "max_children", "max_data_bytes", "digest", "tls"});
  if (!fields) return;
  ZooKeeperLockSpec spec;
  spec.max_children = 64;
  spec.max_data_bytes = 16384;
  ParseZooKeeperEnsemble(r, entry, *fields, path, spec);
  cluster.patroni_zookeeper = std::move(spec);
}

}  // namespace

// Patroni: scope, namespace, etcd, discover and discovery, keys of the cluster itself. Patroni's
// own ttl lives in the DCS: without an explicit one the runtime follows it.
void ParsePatroni(ConfigReader& r, ClusterContext& context, ClusterSpec& cluster) {
  const Fields& fields = context.fields;
  const std::string& path = context.path;
  cluster.scope = cluster.name;
  if (context.kind) cluster.ttl_from_dcs = !r.Optional(fields, "ttl");
  if (const Entry* scope = r.Optional(fields, "scope")) {
    cluster.scope = r.ValidName(*scope, Join(path, "scope")).value_or("");
  }
  if (const Entry* ns = r.Optional(fields, "namespace")) {
    ParseNamespace(r, *ns, Join(path, "namespace"), cluster);
  }
  // The DCS: exactly one of etcd and zookeeper.
  const Entry* etcd = r.Optional(fields, "etcd");
  const Entry* zookeeper = r.Optional(fields, "zookeeper");
  if (etcd) ParseEtcd(r, *etcd, Join(path, "etcd"), cluster);
  if (zookeeper) ParseZooKeeper(r, *zookeeper, Join(path, "zookeeper"), cluster);
  if (etcd && zookeeper) {
    r.AddError(zookeeper->Mark(), Join(path, "zookeeper"),
               "give either etcd or zookeeper, not both: Patroni uses one DCS");
  } else if (!etcd && !zookeeper && context.kind) {
    r.AddError(context.node.Mark(), Join(path, "etcd"), "required (or zookeeper)");
  }
  ParseDiscover(r, context, cluster, "the DCS");
}

}  // namespace sbd
