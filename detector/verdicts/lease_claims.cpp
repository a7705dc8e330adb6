#include "detector/verdicts/lease_claims.h"

namespace sbd {

void NameHolderByToken(std::variant<LockRecord, ProbeFailure>& record,
                       const std::vector<Observation>& round) {
  LockRecord* view = std::get_if<LockRecord>(&record);
  if (view == nullptr || !view->holder.empty() || view->holder_token.empty()) return;
  std::vector<std::string> claiming;
  std::vector<std::string> carrying;
  for (const Observation& obs : round) {
    const std::optional<Claim> claim = obs.claim();
    if (!claim || claim->token != view->holder_token) continue;
    (claim->holds ? claiming : carrying).push_back(obs.member);
  }
  const std::vector<std::string>& named = claiming.empty() ? carrying : claiming;
  if (named.size() == 1) view->holder = named.front();
}

}  // namespace sbd
