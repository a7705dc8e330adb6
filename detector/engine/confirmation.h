#pragma once

// Confirmation, in one place: which members of a round are candidates, whether a re-probe
// confirms them (the readings overlap, every candidate still writable: ConfirmedWritable), how
// often a round re-probes, and what explains a candidate away (a switchover or failover seen
// between the two readings, or the lock store moving the lock). Pure: no threads, no sockets.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "detector/verdicts/verdict.h"
#include "probes/probe.h"
#include "suppressors/suppressor.h"

namespace sbd {

/// One round's raw answers: one observation per probed member (with its manager's claim), and
/// the lock store's answer.
struct RoundReadings {
  std::vector<Observation> members;
  std::optional<LockRecordResult> dcs;
};

/// What confirmation found: whether the round raised a candidate, whether the re-probe
/// confirmed it, and, when it did not, the switchover or failover that explains it.
struct Confirmation {
  bool candidate = false;
  bool confirmed = false;
  std::optional<TransitionEvidence> transition;
};

/// How many more confirmation re-probes a round may take while every candidate stays writable.
constexpr int kConfirmationRetries = 2;

/// Members of `lineage` seen writable in `round` (by index), unless their manager claims
/// another scope: a confirmation candidate when there are two or more.
std::vector<size_t> ConfirmationCandidates(const ClusterSpec& spec,
                                           const std::vector<Observation>& round,
                                           const std::string& lineage);

/// Whether a re-probe that confirmed nothing is taken again: readings that take well under a
/// millisecond (Redis) can miss each other on a busy machine even when sent together, and while
/// every candidate still answers writable that is no transition. At most kConfirmationRetries.
bool ReprobeAgain(int retries, const std::vector<std::string>& confirmed,
                  const std::vector<Observation>& reprobe);

/// The re-probe's verdict on the round's candidates (`again`, indexes into `round.members`),
/// `confirmed` being ConfirmedWritable's answer: confirmed unless a transition between the two
/// readings, or the lock store's handover (DescribeHandover, with the cluster's `history`
/// fetched only then and its `ttl`), explains it. The re-probe's fresher readings replace the
/// round's (keeping each member's manager claim), and its lock record too when readable.
Confirmation ConfirmRound(RoundReadings& round, const std::vector<size_t>& again,
                          RoundReadings reprobe, const std::vector<std::string>& confirmed,
                          const std::function<ClusterHistory()>& history, WallClock::time_point now,
                          Millis ttl);

}  // namespace sbd
