// A lineage (PostgreSQL system identifier) writable in two places at once: a standby cluster
// promoted at cutover while the old primary still takes writes, seen across configured
// clusters or across Patroni scopes inside one. Not a split brain of one cluster (each side
// holds its own lock), but the same data diverging all the same: a warning, unless a `cutover`
// declaration says it is the plan.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "detector/config/declaration.h"
#include "probes/probe.h"

namespace sbd {

/// Where writable members of one lineage were seen in one cluster's latest round.
struct LineageSighting {
  std::string cluster;
  std::string unit;  ///< the owner: the Patroni scope the member claims, or the cluster name
  std::string home;  ///< the cluster's own owner: its scope, or its name
  std::string lineage;
  std::string member;
};

struct LineageFork {
  std::string lineage;
  /// The other owners (scopes or clusters), sorted: the first kMaxForkPartners of them. A
  /// fleet cloned from one base backup shares one lineage across every cluster, and a list of
  /// all of them per cluster would cost O(clusters^2) memory and time at every check.
  std::vector<std::string> with;
  size_t with_total = 0;             ///< how many other owners there are in all
  std::vector<std::string> members;  ///< this cluster's writable members of the lineage
  /// The cutover declaration that says this fork is planned, if any.
  std::optional<Declaration> declared_by;
};

/// At most this many of a fork's other owners are named (`LineageFork::with`).
constexpr size_t kMaxForkPartners = 5;

/// Pure: for each cluster, the forks its writable members are part of. A fork needs two or
/// more owners of one lineage with writable members at once.
std::map<std::string, std::vector<LineageFork>> FindLineageForks(
    const std::vector<LineageSighting>& sightings, const std::vector<Declaration>& active,
    WallTime now);

}  // namespace sbd
