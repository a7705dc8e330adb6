// Fencing-aware severity (issue 13, part 2). Exclusion lives at the resource; the lock only
// queues. A zombie whose token the resource already refuses cannot do harm (a warning); a
// resource or lock store whose token went backwards means the fence itself is broken (a page).
#pragma once

#include <chrono>
#include <vector>

#include "detector/verdicts/verdict.h"

namespace sbd {

/// How long a regression keeps FencingTokenRegressed firing after it was last seen.
constexpr std::chrono::minutes kFencingRegressionHold{15};

/// Folds one successful read of the lock store into `memory`: a store revision below the
/// highest seen (a restore from backup) and a resource token below the highest the witness
/// showed (the resource accepted a lower token after a higher one) are regressions. Regressions
/// older than kFencingRegressionHold are forgotten. A resource token above every revision the
/// store showed (one it never issued) is not remembered as the resource's high; it is logged
/// once when it appears. Not thread-safe.
void RecordFencing(FencingMemory& memory, const LockRecord& view, WallClock::time_point at);

/// Fills the fencing fields of `assessment` from this round's record and claims: the zombies
/// whose decimal token is below the resource's (fenced), whether every zombie of a confirmed
/// split brain is fenced while the fence holds, and the regressions remembered. `view` is null
/// when the store was not read this round (nothing is fenced then). A resource token the store
/// never issued (above its revision, or with no revision to check) fences nobody: it is shown,
/// with `resource_token_unissued` and `fencing_warning` said. Pure; thread-safe.
void JudgeFencing(const FencingMemory& memory, const LockRecord* view,
                  const std::vector<Observation>& round, Assessment& assessment);

}  // namespace sbd
