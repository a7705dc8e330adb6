#pragma once

// Readers more than one kind uses: Redis addresses (redis, redis_lease), etcd gateway endpoints
// (patroni, etcd_election), discovery (patroni, repmgr, pg_auto_failover) and the claim query of
// the application lease kinds.

#include <optional>
#include <string>
#include <vector>

#include "detector/config/config_reader.h"

namespace sbd {
struct ClusterContext;
struct ClusterSpec;
struct ZooKeeperLockSpec;
struct ResourceWitnessSpec;
namespace kind_parsing {

using Entry = ConfigReader::Entry;
using Fields = ConfigReader::Fields;
using SeenNames = ConfigReader::SeenNames;

// Application leases: the longest key, pattern, prefix or identity accepted.
constexpr size_t kMaxLeaseKeyBytes = 1024;

/// host:port of a Redis server or sentinel, with a port in 1-65535.
std::optional<std::string> RedisAddress(ConfigReader& r, const Entry& entry,
                                        const std::string& path);

/// A non-empty list of etcd v3 JSON gateway URLs.
std::vector<std::string> EtcdEndpoints(ConfigReader& r, const Entry& endpoints,
                                       const std::string& path);

/// The keys every ZooKeeper block has (zookeeper_lock's, Patroni's `zookeeper:`), read from the
/// block's `fields` into `spec`: hosts (required), session_timeout, max_children,
/// max_data_bytes and digest; `tls` is refused with the reason. Keys not given keep `spec`'s
/// values.
void ParseZooKeeperEnsemble(ConfigReader& r, const Entry& block, const Fields& fields,
                            const std::string& path, ZooKeeperLockSpec& spec);

/// `discover` and `discovery` (dsn, password_file or password_env, max_members, expire_after)
/// of a kind whose record registers its members (Patroni's DCS, repmgr.nodes, the monitor's
/// nodes): read into `cluster.discovery`; with discover: true the cluster may list no member.
/// `record` words where discovered members' host and port come from ("the DCS").
void ParseDiscover(ConfigReader& r, ClusterContext& context, ClusterSpec& cluster,
                   const char* record);

/// The claim's metric, the label naming the lock and its value, and the token's label.
/// Also the resource witness's query (`witness`): its url instead of a token label.
template <typename Spec>
std::optional<Fields> ParseClaimQuery(ConfigReader& r, const Entry& entry, const std::string& path,
                                      Spec& spec, bool witness = false) {
  const std::optional<Fields> claim =
      witness ? r.ReadMapping(entry, path, {"url", "metric", "lock_label", "lock"})
              : r.ReadMapping(entry, path, {"metric", "lock_label", "lock", "token_label"});
  if (!claim) return claim;
  auto label = [&](const char* key, bool metric, std::string& field) {
    const Entry* e = r.Optional(*claim, key);
    if (!e) return;
    const std::optional<std::string> value = r.String(*e, cfg::Join(path, key));
    if (!value) return;
    if (!cfg::IsPrometheusName(*value, metric)) {
      r.AddError(e->Mark(), cfg::Join(path, key),
                 metric ? "expected a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"
                        : "expected a label name ([a-zA-Z_][a-zA-Z0-9_]*)");
      return;
    }
    field = *value;
  };
  label("metric", true, spec.claim_metric);
  label("lock_label", false, spec.lock_label);
  label("token_label", false, spec.token_label);
  if (!spec.token_label.empty() && spec.token_label == spec.lock_label) {
    r.AddError(claim->at("token_label").Mark(), cfg::Join(path, "token_label"),
               "must differ from lock_label");
  }
  if (const Entry* lock = r.Optional(*claim, "lock")) {
    const std::optional<std::string> value = r.String(*lock, cfg::Join(path, "lock"));
    if (value && value->empty()) {
      r.AddError(lock->Mark(), cfg::Join(path, "lock"), "must not be empty");
    }
    if (value && !value->empty()) spec.lock = *value;
  }
  return claim;
}

/// A lock's `resource_witness:` (etcd_election, zookeeper_lock): its url and the query of the
/// highest token the resource accepted, under the claim's rules; `lock` defaults to the claims'.
/// nullopt after an error (reported).
std::optional<ResourceWitnessSpec> ParseResourceWitness(ConfigReader& r, const Entry& entry,
                                                        const std::string& path,
                                                        const std::string& lock);

}  // namespace kind_parsing
}  // namespace sbd
