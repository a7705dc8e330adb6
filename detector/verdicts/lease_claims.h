#pragma once

// Locks whose store keeps the holder's token rather than a member's name (an application
// lease's key, an etcd election's value, a ZooKeeper lock's node): the holder is the member
// claiming with that token. The zombie rule itself is the engine's, for every kind (Assess,
// verdict.h): a claimer the record does not name.

#include <string>
#include <vector>

#include "probes/probe.h"

namespace sbd {

/// For a record that keeps a token (`holder_token`) and names no member: names as holder the
/// one member of `round` whose claim carries that token, preferring one that claims the lock;
/// nobody when none or several do. Leaves failures and named holders alone. Thread-safe.
void NameHolderByToken(std::variant<LockRecord, ProbeFailure>& record,
                       const std::vector<Observation>& round);

}  // namespace sbd
