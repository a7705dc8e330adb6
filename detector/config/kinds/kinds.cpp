#include "detector/config/kinds/kinds.h"

namespace sbd {

const std::vector<KindConfig>& Kinds() {
  // One line per kind: name, claims_only, patroni_urls, block, keys, parse, parse_member,
  // words, remediation.
  // clang-format off
  static const std::vector<KindConfig> kinds = {
    {"postgres",      false, false, nullptr,         {},                                                      nullptr,           ParsePostgresMember, &kWritableWords, RemediationSupport::kNone},
    {"patroni",       false, true,  nullptr,         {"scope", "namespace", "etcd", "zookeeper", "discover", "discovery"}, ParsePatroni, ParsePostgresMember, &kWritableWords, RemediationSupport::kPostgresFence},
    {"redis",         true,  false, "redis",         {},                                                      ParseRedis,        ParseRedisMember, &kWritableWords, RemediationSupport::kRedisFence},
    {"redis_lease",   true,  false, "redis_lease",   {},                                                      ParseRedisLease,   ParseClaimMember, &kLeaseWords, RemediationSupport::kHook},
    {"k8s_lease",     true,  false, "k8s_lease",     {},                                                      ParseK8sLease,     ParseClaimMember, &kLeaseWords, RemediationSupport::kHook},
    {"etcd_election", true,  false, "etcd_election", {},                                                      ParseEtcdElection, ParseClaimMember, &kLockWords, RemediationSupport::kHook},
    {"zookeeper_lock", true, false, "zookeeper_lock", {},                                                     ParseZooKeeperLock, ParseClaimMember, &kLockWords, RemediationSupport::kHook},
    {"pg_auto_failover", false, false, "pg_auto_failover", {"discover", "discovery"},                    ParsePgAutoFailover, ParsePostgresMember, &kWritableWords, RemediationSupport::kPostgresFence},
    {"repmgr",        false, false, "repmgr",        {"discover", "discovery"},                               ParseRepmgr,       ParsePostgresMember, &kWritableWords, RemediationSupport::kPostgresFence},
  };
  // clang-format on
  return kinds;
}

const ClaimWords kWritableWords = {
    "writable",      "is writable",    "is the only writable member",
    "none writable", "writable since", "writable without the leader key"};
const ClaimWords kLeaseWords = {"claiming the lease",
                                "claims the lease",
                                "is the only member claiming the lease",
                                "none claiming the lease",
                                "claiming the lease since",
                                "claims the lease while the store names another holder"};
const ClaimWords kLockWords = {"claiming the lock",
                               "claims the lock",
                               "is the only member claiming the lock",
                               "none claiming the lock",
                               "claiming the lock since",
                               "claims the lock while the store names another holder"};

const ClaimWords& ClaimWordsOf(const std::string& kind) {
  const KindConfig* found = FindKind(kind);
  return found != nullptr && found->words != nullptr ? *found->words : kWritableWords;
}

const KindConfig* FindKind(const std::string& name) {
  for (const KindConfig& kind : Kinds()) {
    if (name == kind.name) return &kind;
  }
  return nullptr;
}

std::string KindNames() {
  const std::vector<KindConfig>& kinds = Kinds();
  std::string out;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0) out += i + 1 == kinds.size() ? " or " : ", ";
    out += kinds[i].name;
  }
  return out;
}

}  // namespace sbd
