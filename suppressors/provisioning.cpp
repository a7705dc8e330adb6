#include "suppressors/provisioning.h"

#include <algorithm>
#include <set>

namespace sbd {

std::vector<std::string> InvolvedMembers(const ClusterSpec& spec, const Assessment& a) {
  std::set<std::string> out;
  auto add = [&](const std::vector<std::string>& members) {
    out.insert(members.begin(), members.end());
  };
  switch (a.verdict) {
    case Verdict::kSplitBrain:
      add(a.writable);
      break;
    case Verdict::kSuspected:
      add(a.writable);
      add(a.suspects);
      add(a.zombies);
      break;
    case Verdict::kDrift:
      add(a.drift);
      break;
    case Verdict::kUnknown:
      add(a.unreadable);
      break;
    case Verdict::kNoPrimary:
      for (const auto& m : spec.members) out.insert(m.name);
      break;
    case Verdict::kHealthy:
    case Verdict::kSuppressed:
      break;
  }
  return {out.begin(), out.end()};
}

void ProvisioningSuppressor::Apply(const SuppressionInput& in, Assessment& a) const {
  if (a.verdict == Verdict::kHealthy || a.verdict == Verdict::kSuppressed) return;
  const std::vector<std::string> involved = InvolvedMembers(in.spec, a);
  if (involved.empty()) return;
  // Every member the finding rests on must be covered, each by the first active declaration
  // that covers it; one uncovered member and the finding stands.
  std::vector<std::pair<const Declaration*, std::vector<std::string>>> used;
  for (const auto& member : involved) {
    const std::string scope = ClaimedScope(in, member);
    const Declaration* cover = nullptr;
    for (const auto& d : in.declarations) {
      if (d.ActiveAt(in.now) && d.CoversMember(in.spec.name, in.spec.scope, member, scope)) {
        cover = &d;
        break;
      }
    }
    if (cover == nullptr) return;
    auto it =
        std::find_if(used.begin(), used.end(), [&](const auto& u) { return u.first == cover; });
    if (it == used.end()) {
      used.push_back({cover, {member}});
    } else {
      it->second.push_back(member);
    }
  }
  const Verdict hidden = a.verdict;
  for (const auto& [d, members] : used) {
    Suppression s;
    s.suppressor = name();
    s.kind = DeclarationKindName(d->kind);
    s.reason = d->reason;
    s.declaration_id = d->id;
    s.hidden = VerdictName(hidden);
    s.members = members;
    s.expires = d->expires;
    a.suppressions.push_back(std::move(s));
  }
  a.suppressed_split_brain = hidden == Verdict::kSplitBrain;
  a.summary = "suppressed (" + std::string(VerdictName(hidden)) + "): " + a.summary;
  a.verdict = Verdict::kSuppressed;
}

}  // namespace sbd
