#include "suppressors/label_regrouping.h"

namespace sbd {

void LabelRegroupingSuppressor::Apply(const SuppressionInput& in, Assessment& a) const {
  // Only when a count by label would have paged: two or more writable under the label.
  if (a.drift.empty() || a.writable.size() + a.drift.size() < 2) return;
  Suppression s;
  s.suppressor = name();
  s.hidden = VerdictName(Verdict::kSplitBrain);
  s.members = a.drift;
  for (const auto& member : a.drift) {
    for (const auto& obs : in.round) {
      const auto claim = obs.claim();
      if (obs.member != member || !claim) continue;
      if (!s.reason.empty()) s.reason += "; ";
      s.reason +=
          member + (obs.reading() ? " is system identifier " : " is lineage ") + claim->lineage;
      const std::string scope = ClaimedScope(in, member);
      if (!scope.empty() && scope != in.spec.scope) s.reason += " in scope " + scope;
    }
  }
  s.reason += ", not lineage " + a.lineage;
  if (!in.spec.scope.empty()) s.reason += " scope " + in.spec.scope;
  s.reason += ": grouped here by label, not counted";
  s.expires = in.now + in.ttl;
  a.suppressions.push_back(std::move(s));
}

}  // namespace sbd
