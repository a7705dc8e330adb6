#include "detector/engine/confirmation.h"

#include <algorithm>

#include "suppressors/transition.h"

namespace sbd {

std::vector<size_t> ConfirmationCandidates(const ClusterSpec& spec,
                                           const std::vector<Observation>& round,
                                           const std::string& lineage) {
  std::vector<size_t> out;
  const LineageLinks links(round);
  for (size_t i = 0; i < round.size(); ++i) {
    const Observation& obs = round[i];
    if (obs.seen_writable() && links.Same(obs.claim()->lineage, lineage) &&
        !ClaimsOtherScope(spec, obs)) {
      out.push_back(i);
    }
  }
  return out;
}

bool ReprobeAgain(int retries, const std::vector<std::string>& confirmed,
                  const std::vector<Observation>& reprobe) {
  const bool all_writable =
      !reprobe.empty() && std::all_of(reprobe.begin(), reprobe.end(),
                                      [](const Observation& o) { return o.seen_writable(); });
  return retries < kConfirmationRetries && confirmed.empty() && all_writable;
}

Confirmation ConfirmRound(RoundReadings& round, const std::vector<size_t>& again,
                          RoundReadings reprobe, const std::vector<std::string>& confirmed,
                          const std::function<ClusterHistory()>& history, WallClock::time_point now,
                          Millis ttl) {
  std::vector<Observation>& first = round.members;
  Confirmation out;
  out.candidate = true;
  out.confirmed = !confirmed.empty();
  if (!out.confirmed) out.transition = DescribeTransition(first, reprobe.members);
  const std::optional<LockRecordResult>& record = reprobe.dcs ? reprobe.dcs : round.dcs;
  const LockRecord* view = record ? std::get_if<LockRecord>(&*record) : nullptr;
  if (out.confirmed && view != nullptr) {
    out.transition = DescribeHandover(*view, confirmed, history(), now, ttl);
    out.confirmed = !out.transition.has_value();
  }
  if (reprobe.dcs && std::holds_alternative<LockRecord>(*reprobe.dcs)) {
    round.dcs = std::move(reprobe.dcs);
  }
  // The re-probe is the fresher reading: it replaces the first one, keeping the claim.
  for (size_t i = 0; i < again.size(); ++i) {
    reprobe.members[i].patroni = std::move(first[again[i]].patroni);
    first[again[i]] = std::move(reprobe.members[i]);
  }
  return out;
}

}  // namespace sbd
