#include "detector/verdicts/fencing.h"

#include <algorithm>
#include <string>

#include "probes/json_fields.h"

namespace sbd {

void RecordFencing(FencingMemory& memory, const DcsView& view, WallClock::time_point at) {
  if (memory.last_regression && at - *memory.last_regression > kFencingRegressionHold) {
    memory.regressions.clear();
    memory.last_regression.reset();
  }
  auto regressed = [&](std::string what) {
    memory.regressions.push_back(std::move(what));
    // Bounded: a value flapping every round must not grow the list without end.
    if (memory.regressions.size() > 8) memory.regressions.erase(memory.regressions.begin());
    memory.last_regression = at;
  };
  if (view.store_revision > 0) {
    if (view.store_revision < memory.store_revision_high) {
      regressed("the lock store's revision went back from " +
                std::to_string(memory.store_revision_high) + " to " +
                std::to_string(view.store_revision) + " (restored from a backup?)");
    }
    memory.store_revision_high = std::max(memory.store_revision_high, view.store_revision);
  }
  if (view.resource_token) {
    if (*view.resource_token < memory.resource_high) {
      regressed("the resource accepted token " + std::to_string(*view.resource_token) + " after " +
                std::to_string(memory.resource_high));
    }
    memory.resource_high = std::max(memory.resource_high, *view.resource_token);
  }
}

void JudgeFencing(const FencingMemory& memory, const DcsView* view,
                  const std::vector<Observation>& round, Assessment& assessment) {
  assessment.fencing_regressions = memory.regressions;
  if (view == nullptr || !view->resource_token) return;
  assessment.resource_token = view->resource_token;
  for (const std::string& zombie : assessment.zombies) {
    for (const Observation& obs : round) {
      const LockClaimReading* claim = obs.member == zombie ? obs.lock_claim() : nullptr;
      if (claim == nullptr) continue;
      const std::optional<std::int64_t> token = ParseDecimalInt64(claim->token);
      if (token && *token < *view->resource_token) assessment.fenced_zombies.push_back(zombie);
    }
  }
  // Fenced only when the holder is known, every other writable member is a fenced zombie, and
  // the fence has not been seen broken.
  const bool all_fenced = !assessment.zombies.empty() &&
                          assessment.fenced_zombies.size() == assessment.zombies.size() &&
                          assessment.writable.size() == assessment.zombies.size() + 1;
  assessment.split_brain_fenced = assessment.verdict == Verdict::kSplitBrain &&
                                  !assessment.lock_holder.empty() && all_fenced &&
                                  assessment.fencing_regressions.empty();
}

}  // namespace sbd
