#pragma once

#include <string>
#include <vector>

#include "detector/engine/cluster_state.h"

namespace sbd {

/// One witness's view of who the primary (the lock's holder) is: a member about itself, the
/// lock store, a member's manager (Patroni's REST API), a replica's WAL receiver. Plain value.
struct WitnessView {
  std::string witness;  ///< for people: "pg-a itself", "the lock store", "pg-a's Patroni", ...
  std::string names;    ///< the member it names as primary; empty when it names nobody
  bool stale = false;   ///< this round's read of it failed: the view is from `as_of`
  WallClock::time_point as_of{};  ///< when the view was read
  bool disagrees = false;         ///< names a member other than the majority of fresh views
};

/// Every witness of a cluster side by side, in a fixed order (members' own claims, the lock
/// store, managers, replicas), with the member most fresh views name (`majority`, empty on a
/// tie or when none names anybody). Pure.
struct WitnessTable {
  std::vector<WitnessView> views;
  std::string majority;
};

/// The witness table of a cluster's last round.
WitnessTable WitnessViews(const ClusterSnapshot& c);

}  // namespace sbd
