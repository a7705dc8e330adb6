#include "detector/config/kinds/kinds.h"

namespace sbd {

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
