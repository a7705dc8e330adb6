#include "detector/verdicts/fencing.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "detector/common/logfmt.h"
#include "probes/json_fields.h"

namespace sbd {
namespace {

// The highest revision the lock store has shown: no token it issued is above it. 0 unknown.
std::int64_t HighestIssued(const FencingMemory& memory, const LockRecord& view) {
  return std::max(memory.store_revision_high, view.store_revision);
}

// Why the witness's token is not one the lock store issued; empty when it is (or there is none).
// Anyone who can write the resource's metric could otherwise fence every zombie with 2^53.
std::string UnissuedToken(const FencingMemory& memory, const LockRecord& view) {
  if (!view.resource_token) return "";
  const std::int64_t highest = HighestIssued(memory, view);
  const std::string token = std::to_string(*view.resource_token);
  if (highest <= 0) {
    return "the resource witness reports token " + token +
           ", and the lock store gave no revision to check it against: not evidence of a fence";
  }
  if (*view.resource_token <= highest) return "";
  return "the resource witness reports token " + token +
         ", which the lock store never issued (its revision is " + std::to_string(highest) +
         "): not evidence of a fence";
}

}  // namespace

void RecordFencing(FencingMemory& memory, const LockRecord& view, WallClock::time_point at) {
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
  const std::string unissued = UnissuedToken(memory, view);
  if (unissued.empty()) {
    memory.unissued_resource_token.reset();
  } else {
    if (memory.unissued_resource_token != view.resource_token) {
      // No endpoint: it may carry userinfo. The holder says which lock it is.
      spdlog::warn("msg=\"resource witness token not believed\" holder=\"{}\" reason=\"{}\"",
                   LogfmtEscape(view.holder), unissued);
    }
    memory.unissued_resource_token = view.resource_token;
  }
  // Only a token the store issued is the resource's high: a forged one must not turn every
  // honest token after it into a regression.
  if (view.resource_token && unissued.empty()) {
    if (*view.resource_token < memory.resource_high) {
      regressed("the resource accepted token " + std::to_string(*view.resource_token) + " after " +
                std::to_string(memory.resource_high));
    }
    memory.resource_high = std::max(memory.resource_high, *view.resource_token);
  }
}

void JudgeFencing(const FencingMemory& memory, const LockRecord* view,
                  const std::vector<Observation>& round, Assessment& assessment) {
  assessment.fencing_regressions = memory.regressions;
  if (view == nullptr || !view->resource_token) return;
  assessment.resource_token = view->resource_token;
  assessment.fencing_warning = UnissuedToken(memory, *view);
  if (!assessment.fencing_warning.empty()) {
    assessment.resource_token_unissued = true;
    assessment.summary += "; " + assessment.fencing_warning;
    return;  // shown, never a fence: the split brain pages as unfenced
  }
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
