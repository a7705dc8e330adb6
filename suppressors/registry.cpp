// The suppressors, registered explicitly, in the order they run: the evidence-based ones
// first (they only record), the declaration-based one last (it sees the final finding).
#include "suppressors/label_regrouping.h"
#include "suppressors/provisioning.h"
#include "suppressors/suppressor.h"
#include "suppressors/transition.h"

namespace sbd {

const std::vector<std::unique_ptr<Suppressor>>& RegisteredSuppressors() {
  static const std::vector<std::unique_ptr<Suppressor>> all = [] {
    std::vector<std::unique_ptr<Suppressor>> list;
    list.push_back(std::make_unique<TransitionSuppressor>());
    list.push_back(std::make_unique<LabelRegroupingSuppressor>());
    list.push_back(std::make_unique<ProvisioningSuppressor>());
    return list;
  }();
  return all;
}

void ApplySuppressors(const SuppressionInput& in, Assessment& a) {
  for (const auto& suppressor : RegisteredSuppressors()) suppressor->Apply(in, a);
}

std::string ClaimedScope(const SuppressionInput& in, const std::string& member) {
  for (const auto& obs : in.round) {
    if (obs.member != member || !obs.patroni) continue;
    if (const auto* claim = std::get_if<PatroniReading>(&*obs.patroni)) return claim->scope;
  }
  auto it = in.history.members.find(member);
  if (it != in.history.members.end() && it->second.last_patroni) {
    return it->second.last_patroni->scope;
  }
  return "";
}

}  // namespace sbd
