#include "detector/config/kinds/kinds.h"

namespace sbd {

const std::vector<KindConfig>& Kinds() {
  // One line per kind: name, claims_only, patroni_urls, block, keys, parse, parse_member.
  // clang-format off
  static const std::vector<KindConfig> kinds = {
    {"postgres",      false, false, nullptr,         {},                                                      nullptr,           ParsePostgresMember},
    {"patroni",       false, true,  nullptr,         {"scope", "namespace", "etcd", "discover", "discovery"}, ParsePatroni,      ParsePostgresMember},
    {"redis",         true,  false, "redis",         {},                                                      ParseRedis,        ParseRedisMember},
    {"redis_lease",   true,  false, "redis_lease",   {},                                                      ParseRedisLease,   ParseClaimMember},
    {"k8s_lease",     true,  false, "k8s_lease",     {},                                                      ParseK8sLease,     ParseClaimMember},
    {"etcd_election", true,  false, "etcd_election", {},                                                      ParseEtcdElection, ParseClaimMember},
    {"zookeeper_lock", true, false, "zookeeper_lock", {},                                                     ParseZooKeeperLock, ParseClaimMember},
  };
  // clang-format on
  return kinds;
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
