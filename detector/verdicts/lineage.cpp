#include "detector/verdicts/lineage.h"

#include <algorithm>
#include <set>

namespace sbd {

std::map<std::string, std::vector<LineageFork>> FindLineageForks(
    const std::vector<LineageSighting>& sightings, const std::vector<Declaration>& active,
    WallTime now) {
  // One pass to index, one over the forked lineages only: thousands of clusters with one
  // lineage each cost O(n log n), not O(clusters x sightings).
  struct Lineage {
    std::set<std::string> units;
    std::map<std::string, std::vector<const LineageSighting*>> by_cluster;
  };
  std::map<std::string, Lineage> lineages;
  for (const auto& s : sightings) {
    Lineage& l = lineages[s.lineage];
    l.units.insert(s.unit);
    l.by_cluster[s.cluster].push_back(&s);
  }
  std::map<std::string, std::vector<LineageFork>> out;
  for (const auto& [lineage, l] : lineages) {
    if (l.units.size() < 2) continue;
    std::optional<Declaration> declared_by;
    for (const auto& d : active) {
      if (d.kind != DeclarationKind::kCutover || !d.ActiveAt(now)) continue;
      if (!l.by_cluster.count(d.cluster)) continue;
      if (!d.scope.empty() && !l.units.count(d.scope)) continue;
      declared_by = d;
      break;
    }
    for (const auto& [cluster, seen] : l.by_cluster) {
      LineageFork fork;
      fork.lineage = lineage;
      fork.declared_by = declared_by;
      const std::string& home = seen.front()->home;
      for (const auto* s : seen) fork.members.push_back(s->member);
      fork.with_total = l.units.size() - (l.units.count(home) ? 1 : 0);
      for (const auto& unit : l.units) {
        if (fork.with.size() == kMaxForkPartners) break;
        if (unit != home) fork.with.push_back(unit);
      }
      out[cluster].push_back(std::move(fork));
    }
  }
  return out;
}

}  // namespace sbd
