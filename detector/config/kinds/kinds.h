#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "detector/config/claim_words.h"
#include "detector/config/config.h"
#include "detector/config/config_reader.h"

namespace sbd {

struct KindConfig;

/// What the opt-in remediation may do for a kind (detector/config/remediation.h).
enum class RemediationSupport {
  kNone,           ///< no lock store names a holder: nothing (the config refuses the block)
  kHook,           ///< members are processes: fenced by the operator's hook (hook_fence.h)
  kPostgresFence,  ///< members are PostgreSQL servers: fenced read-only (remediation/pg_fence.h)
  kRedisFence,     ///< members are Redis servers: fenced by their own write guard (redis_fence.h)
};

/// What a kind's parsers see of their cluster, and what the kind tells the cluster parser back.
struct ClusterContext {
  const YAML::Node& node;              ///< the cluster's mapping
  const std::string& path;             ///< its key path, "clusters[0]"
  const ConfigReader::Fields& fields;  ///< its keys
  /// The cluster's kind; nullptr when `kind:` was invalid (already reported): then every kind's
  /// block and keys are still checked, but none is required.
  const KindConfig* kind;
  /// Set by the kind when the cluster may list no member (Patroni's discover: true).
  bool members_optional = false;
  /// Set by the kind when it words a missing or empty member list its own way.
  std::string no_members_error;
};

/// A cluster kind as the config sees it: the name `kind:` spells, the keys only it may have,
/// and the functions that read them, each reporting its own errors (as the blackbox_exporter's
/// modules do). The kind's file under detector/config/kinds/ has its parsers; its descriptor
/// (probes/kinds/<kind>.cpp, probes/kind.h) holds this beside what the engine builds of it.
struct KindConfig {
  const char* name = "";
  /// Members are Redis servers or claim endpoints: never found by discovery or in file_sd.
  bool claims_only = false;
  /// Members (and file_sd targets) may carry a Patroni REST API URL.
  bool patroni_urls = false;
  /// The kind's own block of the cluster ("redis"), or nullptr.
  const char* block = nullptr;
  /// Cluster keys other than a block that only this kind may have.
  std::vector<std::string> keys;
  /// Reads and validates the kind's block or keys into the cluster; called for the cluster's
  /// kind, and for every kind when `kind:` was invalid (`context.kind` null: nothing is then
  /// required). Null when the kind has neither. The cluster's name is already read.
  void (*parse)(ConfigReader& reader, ClusterContext& context, ClusterSpec& cluster) = nullptr;
  /// Reads one item of `members`; the kind's block is already read into `cluster`.
  MemberSpec (*parse_member)(ConfigReader& reader, const ClusterContext& context,
                             const ClusterSpec& cluster, const YAML::Node& node,
                             const std::string& path, ConfigReader::SeenNames& seen) = nullptr;
  /// How the kind's summaries and pages word a claim (claim_words.h).
  const ClaimWords* words = nullptr;
  /// What `remediation:` may ask of the kind.
  RemediationSupport remediation = RemediationSupport::kNone;
};

/// Every kind, in the order their blocks are read; the first is the default (postgres). Defined
/// by the one list of kinds, probes/kinds/kinds.cpp, from each kind's descriptor: the config
/// parses the kinds that list names, and nothing else lists them.
const std::vector<KindConfig>& Kinds();

/// The kind `kind:` names, or nullptr.
const KindConfig* FindKind(const std::string& name);

/// The kind names as an error lists them: "a, b or c".
std::string KindNames();

// The kinds' parsers, one file each under detector/config/kinds/.
MemberSpec ParsePostgresMember(ConfigReader& reader, const ClusterContext& context,
                               const ClusterSpec& cluster, const YAML::Node& node,
                               const std::string& path, ConfigReader::SeenNames& seen);
void ParsePatroni(ConfigReader& reader, ClusterContext& context, ClusterSpec& cluster);
void ParseRedis(ConfigReader& reader, ClusterContext& context, ClusterSpec& cluster);
MemberSpec ParseRedisMember(ConfigReader& reader, const ClusterContext& context,
                            const ClusterSpec& cluster, const YAML::Node& node,
                            const std::string& path, ConfigReader::SeenNames& seen);
void ParseRedisLease(ConfigReader& reader, ClusterContext& context, ClusterSpec& cluster);
void ParseK8sLease(ConfigReader& reader, ClusterContext& context, ClusterSpec& cluster);
void ParseEtcdElection(ConfigReader& reader, ClusterContext& context, ClusterSpec& cluster);
void ParseZooKeeperLock(ConfigReader& reader, ClusterContext& context, ClusterSpec& cluster);
void ParsePgAutoFailover(ConfigReader& reader, ClusterContext& context, ClusterSpec& cluster);
void ParseRepmgr(ConfigReader& reader, ClusterContext& context, ClusterSpec& cluster);
/// A cluster's `remediation:` block (detector/config/remediation.cpp); `kind` null when the
/// cluster's kind was invalid.
void ParseClusterRemediation(ConfigReader& reader, const ConfigReader::Entry& entry,
                             const std::string& path, const KindConfig* kind, ClusterSpec& cluster);
/// The top-level `remediation:` block: the fleet-wide cap.
void ParseRemediationLimits(ConfigReader& reader, const ConfigReader::Entry& entry,
                            const std::string& path, RemediationLimits& limits);
/// The application lease kinds' members: candidates by metrics URL (kinds/claims.cpp).
MemberSpec ParseClaimMember(ConfigReader& reader, const ClusterContext& context,
                            const ClusterSpec& cluster, const YAML::Node& node,
                            const std::string& path, ConfigReader::SeenNames& seen);

}  // namespace sbd
