#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config_error.h"
#include "detector/config/declaration.h"
#include "detector/config/remediation.h"

namespace sbd {

using Millis = std::chrono::milliseconds;

/// One member of a cluster as the runtime sees it: a name and how to reach its PostgreSQL.
/// Plain value type; thread-safe to share once built.
struct MemberSpec {
  std::string name;
  /// libpq connection string without any password (validated by libpq's own parser).
  std::string dsn;
  /// host:port (or socket directory) for display; never contains a secret.
  std::string address;
  /// Where the password comes from, if anywhere: at most one of these is set.
  std::optional<std::string> password_file;
  std::optional<std::string> password_env;
  /// Password found inline in the DSN (allowed, never required, never logged or exported).
  std::optional<std::string> inline_password;
  /// Patroni clusters: the member's REST API base URL ("http://host:8008"); empty otherwise.
  std::string patroni_url;
  /// True when the member came from DCS discovery rather than the config file.
  bool discovered = false;
  /// Application leases: where the candidate exports its claim ("http://host:port/metrics").
  std::string claim_url;
  /// Application leases: the value the candidate writes into the key, which names it in the
  /// record when its claim carries no token label; empty when not configured.
  std::string lease_identity;
};

/// A Redis replication group under Sentinel (the cluster's `redis:` block). Members are Redis
/// servers (`address: host:port`); the sentinels keep the record of which one is master.
/// TLS to the Redis servers and sentinels of a `redis:` block (`tls: true`): the peer's
/// certificate must chain to `ca_file` and name `server_name` (by default the host of the
/// address dialled: a DNS name, or an IP address in the certificate's IP SANs).
struct RedisTlsSpec {
  std::string ca_file;      ///< PEM CA bundle the servers' certificates must chain to
  std::string cert_file;    ///< client certificate chain (PEM), empty for none
  std::string key_file;     ///< the client certificate's private key (PEM), empty for none
  std::string server_name;  ///< the name to send (SNI) and verify; empty: the address's host
};

struct RedisSpec {
  std::string master_name;             ///< the name the sentinels monitor the group under
  std::vector<std::string> sentinels;  ///< host:port of every sentinel, asked each round
  std::string username;                ///< ACL user for AUTH; empty for the default user
  /// Where the members' password comes from, if anywhere (copied onto each member).
  std::optional<std::string> password_file;
  std::optional<std::string> password_env;
  /// The sentinels' own AUTH (their `requirepass` or an ACL user), apart from the members':
  /// Sentinel keeps its users separately.
  std::string sentinel_username;
  std::optional<std::string> sentinel_password_file;
  std::optional<std::string> sentinel_password_env;
  /// Set when `tls: true`: members and sentinels are all dialled with TLS.
  std::optional<RedisTlsSpec> tls;
};

/// An application lease kept as a Redis string key (`SET key token NX PX ttl`, renewed, released
/// by its token's owner), its candidates exporting their claim as a Prometheus metric (the
/// cluster's `redis_lease:` block). Members are the candidates (`metrics_url`).
struct RedisLeaseSpec {
  std::string address;   ///< host:port of the Redis server that keeps the key
  std::string username;  ///< ACL user for AUTH; empty for the default user
  std::optional<std::string> password_file;
  std::optional<std::string> password_env;
  std::string key;                ///< the exact key; empty when `pattern` is set
  std::string pattern;            ///< a SCAN MATCH pattern; empty when `key` is set
  int max_keys = 1000;            ///< SCAN stops after this many distinct keys
  int max_scan_iterations = 100;  ///< SCAN stops after this many round trips
  /// The claim: `metric{<lock_label>="<lock>"}` 1 or 0, its token in `token_label` if any.
  std::string claim_metric = "leader_election_master_status";
  std::string lock_label = "name";
  std::string lock;         ///< default: the cluster's name
  std::string token_label;  ///< empty: claims carry no token (members' identity names them)
};

/// A Kubernetes Lease (`coordination.k8s.io/v1`) read through the API server, its candidates
/// (client-go leader election) exporting `leader_election_master_status` (the cluster's
/// `k8s_lease:` block). Either `api_server` with a token and CA file (a service account's by
/// default), or `kubeconfig`, whose current context gives the server, CA and token.
struct K8sLeaseSpec {
  std::string api_server;  ///< "https://host:port"; empty when `kubeconfig` gives it
  std::string lease_namespace = "default";
  std::string lease;       ///< the Lease's name; default: the cluster's name
  std::string token_file;  ///< the bearer token, re-read at each read (tokens rotate)
  std::string ca_file;     ///< PEM bundle the API server's certificate must chain to
  std::string kubeconfig;  ///< a kubeconfig path; when set, server, CA and token come from it
  /// The claim, as redis_lease has it; `lock` defaults to the Lease's name.
  std::string claim_metric = "leader_election_master_status";
  std::string lock_label = "name";
  std::string lock;
  std::string token_label;  ///< empty: client-go's metric has no token label
};

/// Where a lock's protected resource reports the highest fencing token it accepted: the sample
/// of `metric` whose `lock_label` is `lock` (or the metric's only sample) on `url`.
struct ResourceWitnessSpec {
  std::string url;  ///< "http://host:port/metrics"
  std::string metric = "fencing_token_highest_accepted";
  std::string lock_label = "name";
  std::string lock;  ///< default: the claims' lock
};

/// An etcd v3 election or lock (the `concurrency` recipes: each candidate puts a key under
/// `prefix` with its session's lease; the key with the lowest create revision holds, and that
/// revision is the fencing token), read through the v3 JSON gateway (the cluster's
/// `etcd_election:` block). Members are the candidates (`metrics_url`), claiming as for
/// redis_lease, their token the create revision they believe they hold.
struct EtcdElectionSpec {
  std::vector<std::string> endpoints;  ///< v3 JSON gateway URLs ("http://127.0.0.1:2379")
  std::string prefix;                  ///< the election's or lock's name, as the recipe's prefix
  /// The claim, as for redis_lease.
  std::string claim_metric = "leader_election_master_status";
  std::string lock_label = "name";
  std::string lock;  ///< default: the cluster's name
  std::string token_label;
  /// The protected resource's witness, when it checks tokens (fencing-aware severity).
  std::optional<ResourceWitnessSpec> resource_witness;
};

/// A ZooKeeper lock or election recipe (Curator's InterProcessMutex/LeaderLatch, kazoo's
/// Lock/Election: each candidate creates an ephemeral-sequential child under `path`; the lowest
/// sequence holds, and that child's czxid is the fencing token), read with the C client (the
/// cluster's `zookeeper_lock:` block). Members are the candidates (`metrics_url`), claiming as
/// for etcd_election, their token the czxid they believe they hold.
struct ZooKeeperLockSpec {
  std::vector<std::string> hosts;  ///< "host:port" of the ensemble's servers
  std::string path;                ///< the lock's (or election's) znode, "/locks/orders"
  Millis session_timeout{10000};   ///< asked of the server; it may grant another
  int max_children = 1000;         ///< a read with more children fails
  int max_data_bytes = 1024;       ///< the holder's data above this is not read as identity
  /// digest auth (`zoo_add_auth("digest", "user:password")`); no username: none.
  std::string username;
  std::optional<std::string> password_file;
  std::optional<std::string> password_env;
  /// The claim, as for etcd_election.
  std::string claim_metric = "leader_election_master_status";
  std::string lock_label = "name";
  std::string lock;  ///< default: the cluster's name
  std::string token_label;
  /// The protected resource's witness, as for etcd_election (zookeeper_lock only).
  std::optional<ResourceWitnessSpec> resource_witness;
};

/// A PostgreSQL formation run by pg_auto_failover 2.0 (the cluster's `pg_auto_failover:`
/// block): the monitor keeps each node's goal state in `pgautofailover.node`; members are the
/// nodes' PostgreSQL servers (`dsn:`, as for kind postgres), matched to the monitor's nodes by
/// name (`nodename`) or by address (`nodehost:nodeport`).
struct PgAutoFailoverSpec {
  /// The monitor's database, as a member is reached (dsn and password source); named "monitor".
  MemberSpec monitor;
  std::string formation = "default";
  int group = 0;
};

/// How to reach members found in the DCS: their conn_url gives host and port, this gives the
/// rest of the libpq settings and the credentials.
struct DiscoverySpec {
  bool enabled = false;
  /// libpq settings without host/port, e.g. "user=splitbrain dbname=postgres sslmode=prefer".
  std::string dsn;
  std::optional<std::string> password_file;
  std::optional<std::string> password_env;
  /// At most this many discovered members per cluster: a DCS that anyone can write to must not
  /// make the detector probe without limit.
  int max_members = 16;
  /// A discovered member that has been gone from the DCS and unreadable this long is dropped.
  Millis expire_after = std::chrono::minutes(10);
};

/// Members read from Prometheus file_sd target files (JSON or YAML, as Prometheus reads them):
/// the targets whose label `group_by` equals `group` are this cluster's members, so users reuse
/// the target lists they already have. Re-read when the files change.
struct FileSdSpec {
  std::vector<std::string> files;  ///< paths or globs
  std::string group_by;            ///< the label that groups targets into clusters
  std::string group;               ///< its value for this cluster (default: the cluster name)
  std::string name_label;          ///< label holding the member's name (default: the target)
  std::string port;                ///< PostgreSQL port, when targets point at an exporter
  std::string patroni_url_label;   ///< Patroni: label holding the member's REST URL
  /// libpq settings without host/port, and the credentials, as for discovery.
  std::string dsn;
  std::optional<std::string> password_file;
  std::optional<std::string> password_env;
};

/// A cluster: members that share one lock and are expected to share one lineage.
struct ClusterSpec {
  std::string name;
  Millis ttl{30000};
  /// Default ttl/10; never above ttl/3.
  Millis probe_interval{3000};
  /// Default min(probe_interval, 2s); never above probe_interval.
  Millis probe_timeout{2000};
  /// Whether the lock store's watch (when its kind offers one) wakes the cluster's round the
  /// moment the holder changes; `watch: false` leaves the cluster to its probe interval.
  bool watch = true;
  /// Expected PostgreSQL system identifier; when empty the detector learns it from the
  /// majority of members it reads.
  std::string system_identifier;
  std::vector<MemberSpec> members;

  /// What kind of cluster this is, as `kind:` spells it ("postgres", "patroni", "redis", ...):
  /// one of the kinds listed in probes/kinds/kinds.cpp.
  std::string kind = "postgres";
  /// Patroni: the scope (cluster name in the DCS); the namespace prefix, "/service" by default.
  std::string scope;
  std::string dcs_namespace = "/service";
  /// Patroni: etcd v3 JSON gateway endpoints ("http://127.0.0.1:2379"), tried in turn.
  std::vector<std::string> etcd_endpoints;
  /// Patroni on ZooKeeper (`zookeeper:`, instead of `etcd:`): the ensemble, the detector's own
  /// session timeout, the caps (max_children: members; max_data_bytes: each znode) and the
  /// digest login; `path` and the claim fields are unused (the scope's path is
  /// <namespace>/<scope>).
  std::optional<ZooKeeperLockSpec> patroni_zookeeper;
  /// Patroni: true when ttl was not given, so the DCS config's ttl should be used.
  bool ttl_from_dcs = false;
  /// Patroni: members found in the DCS members keys are probed too.
  DiscoverySpec discovery;
  /// Members from file_sd target files (added to the configured ones).
  std::optional<FileSdSpec> file_sd;
  /// Redis: the Sentinel group and the login.
  RedisSpec redis;
  /// Application leases: the key, the login and the claim query.
  RedisLeaseSpec redis_lease;
  /// Kubernetes Leases: the API server, the Lease and the claim query.
  K8sLeaseSpec k8s_lease;
  /// etcd elections and locks: the gateway, the prefix and the claim query.
  EtcdElectionSpec etcd_election;
  /// ZooKeeper lock and election recipes: the ensemble, the lock path and the claim query.
  ZooKeeperLockSpec zookeeper_lock;
  /// pg_auto_failover: the monitor, the formation and the group.
  PgAutoFailoverSpec pg_auto_failover;
  /// repmgr: the metadata database every member's copy of repmgr.nodes is read from.
  std::string repmgr_database = "repmgr";
  /// repmgr with discover: true: host:port of servers whose copy of the record is read until
  /// the record names its nodes (`repmgr.seeds`); they need not be members.
  std::vector<std::string> repmgr_seeds;
  /// repmgr: the witness node (`repmgr.witness`), named "witness node" (never a member's name): its
  /// copy of the record is read and folded beside the members' each round; it is never a member,
  /// never writable.
  std::optional<MemberSpec> repmgr_witness;
  /// Opt-in remediation of a confirmed zombie; off without a `remediation:` block.
  RemediationSpec remediation;
};

/// Where alerts go: every Alertmanager gets every alert (POST /api/v2/alerts).
struct AlertingSpec {
  std::vector<std::string> alertmanager_urls;
  /// Re-send firing alerts this often; endsAt is leased 4 times this far ahead.
  Millis resend_interval{30000};
  Millis timeout{2000};
  /// Base for generatorURL; default "http://<hostname>:<port>" of --web.listen-address.
  std::string external_url;
  /// Where runbook_url annotations point; default "<external_url>/runbooks/".
  std::string runbook_base_url;
  /// Extra labels on every alert (as Prometheus' external_labels), so the rule path and the
  /// direct push carry the same label set.
  std::vector<std::pair<std::string, std::string>> external_labels;
};

/// Declarations kept as silences in the Alertmanager cluster
/// (suppressions.alertmanager_silences; see suppressors/alertmanager_silences.h).
struct AlertmanagerSilencesSpec {
  bool enabled = false;
  /// Where to read them: the block's own alertmanagers, else alerting.alertmanagers.
  std::vector<std::string> alertmanager_urls;
  Millis refresh_interval{5000};
  /// Per Alertmanager and read: a hung one never delays the others or the drop-in refresh.
  Millis timeout{2000};
  /// The label set of the detector's SplitBrain page, one per cluster (external labels
  /// included), to tell when a silence hides it.
  std::vector<std::map<std::string, std::string>> page_labels;
};

/// Provisioning declarations and where they come from (see suppressors/).
struct SuppressionsSpec {
  /// No declaration may be made for longer than this.
  Millis max_duration{Millis(24 * 3600 * 1000)};
  /// One YAML file per declaration, picked up without restart.
  std::string dropin_dir;
  /// Where declarations made through the HTTP API are kept across restarts.
  std::string state_file;
  /// Declarations written in the config itself.
  std::vector<Declaration> declarations;
  /// Declarations read from Alertmanager silences.
  AlertmanagerSilencesSpec alertmanager_silences;
};

/// The incident log (detector/output/incident_log.h): how long and how many verdict and member
/// state changes it keeps, and the file that carries them across a restart. Plain value type.
struct IncidentLogSpec {
  /// JSON lines, appended and read back at start; empty keeps the log in memory only.
  std::string file;
  /// Events older than this are dropped (and compacted out of the file).
  Millis retention{Millis(7LL * 24 * 3600 * 1000)};
  /// At most this many events are kept; the oldest goes first, and each drop is counted.
  int max_events = 10000;
};

/// A configuration that passed every check. The only config type the runtime accepts:
/// it can only be produced by LoadConfig/ParseConfig, so validation cannot be skipped.
class ValidatedConfig {
 public:
  const std::vector<ClusterSpec>& clusters() const { return clusters_; }
  const std::string& source() const { return source_; }
  const AlertingSpec& alerting() const { return alerting_; }
  const SuppressionsSpec& suppressions() const { return suppressions_; }
  const IncidentLogSpec& incident_log() const { return incident_log_; }
  const RemediationLimits& remediation_limits() const { return remediation_limits_; }
  /// Files whose change should reload the config: file_sd target files (globs expanded).
  const std::vector<std::string>& watched_globs() const { return watched_globs_; }
  /// The same config holding only the clusters `keep` accepts, in order (one shard's share
  /// of the fleet, detector/shard.h).
  ValidatedConfig KeepingClusters(const std::function<bool(const ClusterSpec&)>& keep) const {
    ValidatedConfig kept = *this;
    kept.clusters_.clear();
    for (const ClusterSpec& c : clusters_) {
      if (keep(c)) kept.clusters_.push_back(c);
    }
    return kept;
  }

 private:
  friend class ConfigParser;
  ValidatedConfig() = default;
  std::vector<ClusterSpec> clusters_;
  AlertingSpec alerting_;
  SuppressionsSpec suppressions_;
  IncidentLogSpec incident_log_;
  RemediationLimits remediation_limits_;
  std::vector<std::string> watched_globs_;
  std::string source_;
};

using ConfigResult = std::variant<ValidatedConfig, std::vector<ConfigError>>;

/// Reads and validates a YAML config file; reports every error at once. Thread-safe.
ConfigResult LoadConfig(const std::string& path);

/// Validates YAML text; `file` is only used in error messages. Thread-safe.
ConfigResult ParseConfig(const std::string& yaml_text, const std::string& file);

/// Parses a Prometheus-style duration ("500ms", "2s", "1m30s"); nullopt when malformed
/// or not positive.
std::optional<Millis> ParseDuration(const std::string& text);

/// Formats a duration the way ParseDuration reads it ("1m30s", "250ms").
std::string FormatDuration(Millis d);

/// A libpq keyword/value value in single quotes, with backslash and quote escaped.
std::string QuoteConninfoValue(const std::string& value);

/// Host and port of "host:port", "[v6addr]:port" or a bare host (then `default_port`).
struct HostPort {
  std::string host;
  std::string port;
};
HostPort SplitHostPort(const std::string& authority, const std::string& default_port = "5432");

/// A member found at `at` rather than written in the config (DCS discovery, file_sd targets):
/// host and port are quoted into the DSN, since neither source is trusted to be well-formed,
/// ahead of `hostless_dsn`, the libpq settings that carry no host or port.
MemberSpec MemberAt(std::string name, const HostPort& at, const std::string& hostless_dsn,
                    const std::optional<std::string>& password_file,
                    const std::optional<std::string>& password_env);

/// Resolves the member's password from its file or environment variable, or the inline
/// one. Returns an error message (never containing the secret) on failure.
std::variant<std::optional<std::string>, std::string> ResolvePassword(const MemberSpec& member);

}  // namespace sbd
