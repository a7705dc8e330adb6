#pragma once

#include <string>

namespace sbd {

/// How a kind words its members' claim in summaries and pages, so that an election's page
/// says "claiming the lock" where PostgreSQL's says "writable". Each kind's descriptor
/// (probes/kinds/<kind>.cpp) names its words.
struct ClaimWords {
  const char* many;    ///< after two or more names: "writable", "claiming the lock"
  const char* one;     ///< after one name: "is writable", "claims the lock"
  const char* only;    ///< after the one holder: "is the only writable member"
  const char* none;    ///< no member claims: "none writable"
  const char* since;   ///< before a time: "writable since", "claiming the lock since"
  const char* zombie;  ///< why a member is the zombie: "writable without the leader key"
};

/// Writable members of a database (PostgreSQL and its managers, Redis masters).
extern const ClaimWords kWritableWords;
/// Candidates of a lease (Redis leases, Kubernetes Leases).
extern const ClaimWords kLeaseWords;
/// Candidates of a lock or an election (etcd, ZooKeeper).
extern const ClaimWords kLockWords;

/// The words of the kind `kind:` names; a database's words for a kind that names none.
const ClaimWords& ClaimWordsOf(const std::string& kind);

}  // namespace sbd
