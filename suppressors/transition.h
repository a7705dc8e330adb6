// transition: a candidate that fails confirmation because a switchover or failover is under way
// (the old primary demoted, restarted or shutting down; the timeline advanced) is recorded as a
// transition, with its evidence and a counter, and is not paged.
#pragma once

#include "suppressors/suppressor.h"

namespace sbd {

/// Pure: compares the round that raised the candidate with its re-probe. Returns evidence when
/// at least one candidate member was seen leaving the writable state in a way only a
/// switchover or failover explains (in recovery now, a restarted server, a refused or
/// starting connection); nullopt when the failure is unexplained (a timeout, a cut
/// connection), which stays a suspected split brain.
std::optional<TransitionEvidence> DescribeTransition(const std::vector<Observation>& first,
                                                     const std::vector<Observation>& reprobe);

/// A confirmed double holder that the lock store itself is resolving: while the store says it
/// is moving the lock (Sentinel's failover in progress, agreed by a majority of sentinels) and
/// each writable non-holder has been writable for at most the store's handover bound (a store
/// with none excuses nothing), or while the store's previous holder, read without a break since
/// the change, is still within that bound (Sentinel demotes an old master that still reports
/// master). Needs the store's holder among `writable`; every other writable member must be so
/// explained. nullopt otherwise, and whenever a writable member left a probe unanswered within
/// `ttl`: one back from being frozen or partitioned is never excused.
std::optional<TransitionEvidence> DescribeHandover(const LockRecord& record,
                                                   const std::vector<std::string>& writable,
                                                   const ClusterHistory& history,
                                                   WallClock::time_point now, Millis ttl);

/// Pure: the primary moved from `previous` (last seen as the only writable member, on
/// `previous_timeline`) to the only writable member of this round; nullopt when it did not.
std::optional<TransitionEvidence> DescribePrimaryMove(const std::string& previous,
                                                      std::int64_t previous_timeline,
                                                      const std::vector<std::string>& writable,
                                                      const std::vector<Observation>& round);

class TransitionSuppressor : public Suppressor {
 public:
  const char* name() const override { return "transition"; }
  void Apply(const SuppressionInput& in, Assessment& a) const override;
};

}  // namespace sbd
