// A lock's resource witness (etcd_election, zookeeper_lock): the protected resource's own
// report of the highest fencing token it accepted, read beside the lock store so that the
// verdict can tell a zombie whose writes the resource refuses (SplitBrainFenced) from one whose
// writes land (SplitBrain).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <variant>

#include "detector/config/config.h"
#include "probes/http_loop.h"
#include "probes/probe.h"

namespace sbd {

/// The token a resource witness reports in `text` (Prometheus exposition): the value of the
/// sample of `witness.metric` whose `lock_label` is `witness.lock`, else of its only sample
/// without that label. An error in words when there is none, several, or a value that is not
/// a whole number from 0 to 2^53. Pure; thread-safe.
std::variant<std::int64_t, std::string> WitnessToken(const std::string& text,
                                                     const ResourceWitnessSpec& witness);

/// Reads the witness with `client` by `deadline` and hands `view` to `done` with its
/// `resource_token` set, or with the reason it could not be read in `rejected` (never a
/// failure of the store's read: the lock's record stands without it). Loop thread only;
/// `client` must outlive the call's `done`.
void ReadResourceWitness(LoopHttpClient& client, const ResourceWitnessSpec& witness,
                         SteadyClock::time_point deadline, LockRecord view,
                         std::function<void(LockRecord)> done);

}  // namespace sbd
