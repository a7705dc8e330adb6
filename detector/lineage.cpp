#include "detector/lineage.h"

#include <algorithm>
#include <set>

namespace sbd {

std::map<std::string, std::vector<LineageFork>> FindLineageForks(
    const std::vector<LineageSighting>& sightings, const std::vector<Declaration>& active,
    WallTime now) {
  std::map<std::string, std::set<std::string>> units_by_lineage;
  std::map<std::string, std::set<std::string>> clusters_by_lineage;
  for (const auto& s : sightings) {
    units_by_lineage[s.lineage].insert(s.unit);
    clusters_by_lineage[s.lineage].insert(s.cluster);
  }
  std::map<std::string, std::vector<LineageFork>> out;
  for (const auto& [lineage, units] : units_by_lineage) {
    if (units.size() < 2) continue;
    const auto& clusters = clusters_by_lineage[lineage];
    std::optional<Declaration> declared_by;
    for (const auto& d : active) {
      if (d.kind != DeclarationKind::kCutover || !d.ActiveAt(now)) continue;
      if (!clusters.count(d.cluster)) continue;
      if (!d.scope.empty() && !units.count(d.scope)) continue;
      declared_by = d;
      break;
    }
    for (const auto& cluster : clusters) {
      LineageFork fork;
      fork.lineage = lineage;
      fork.declared_by = declared_by;
      std::string home;
      for (const auto& s : sightings) {
        if (s.cluster == cluster && s.lineage == lineage) {
          home = s.home;
          fork.members.push_back(s.member);
        }
      }
      for (const auto& unit : units) {
        if (unit != home) fork.with.push_back(unit);
      }
      out[cluster].push_back(std::move(fork));
    }
  }
  return out;
}

}  // namespace sbd
