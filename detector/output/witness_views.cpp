#include "detector/output/witness_views.h"

#include <map>

#include "detector/verdicts/witnesses.h"

namespace sbd {
namespace {

// What the member said about itself: it names itself when it holds, nobody otherwise.
void OwnClaim(const MemberSpec& spec, const MemberHistory& h, std::vector<WitnessView>& out) {
  if (!h.last_claim || !h.last_ok) return;
  WitnessView v{spec.name + " itself", h.last_claim->holds ? spec.name : "", false, *h.last_ok};
  v.stale = h.last && !h.last->ok();
  out.push_back(v);
}

// What the member's manager said: it names its member when it calls it the primary/leader.
void ManagerClaim(const MemberSpec& spec, const MemberHistory& h, std::vector<WitnessView>& out) {
  if (!h.last_patroni || !h.last) return;
  const std::string& role = h.last_patroni->role;
  const bool leads = role == "primary" || role == "leader" || role == "standby_leader";
  WitnessView v{spec.name + "'s Patroni", leads ? spec.name : "", false, h.last->window.sent_wall};
  v.stale = h.last->patroni && std::holds_alternative<ProbeFailure>(*h.last->patroni);
  out.push_back(v);
}

// Whom the member's WAL receiver streams from: the primary it follows, when a member.
void Upstream(const MemberSpec& spec, const MemberHistory& h, const std::vector<MemberSpec>& all,
              std::vector<WitnessView>& out) {
  if (!h.last_reading || !h.last_reading->upstream || h.last_reading->upstream->hidden) return;
  const std::string from = SenderMember(*h.last_reading->upstream, all);
  if (from.empty() || !h.last_ok) return;
  WitnessView v{spec.name + "'s WAL receiver", from, false, *h.last_ok};
  v.stale = h.last && !h.last->ok();
  out.push_back(v);
}

// The member most fresh views name; empty on a tie or when none names anybody.
std::string Majority(const std::vector<WitnessView>& views) {
  std::map<std::string, int> votes;
  for (const auto& v : views) {
    if (!v.stale && !v.names.empty()) ++votes[v.names];
  }
  std::string best;
  int most = 0;
  bool tie = false;
  for (const auto& [name, count] : votes) {
    if (count > most) {
      best = name;
      most = count;
      tie = false;
    } else if (count == most) {
      tie = true;
    }
  }
  return tie ? "" : best;
}

}  // namespace

WitnessTable WitnessViews(const ClusterSnapshot& c) {
  WitnessTable table;
  auto& views = table.views;
  for (const auto& spec : c.spec.members) {
    auto it = c.history.members.find(spec.name);
    if (it != c.history.members.end()) OwnClaim(spec, it->second, views);
  }
  if (c.lock.has_store && c.last_good_dcs) {
    WitnessView v{"the lock store", c.last_good_dcs->holder, false, c.last_dcs_success};
    v.stale = !c.last_dcs || std::holds_alternative<ProbeFailure>(*c.last_dcs);
    views.push_back(v);
  }
  for (const auto& spec : c.spec.members) {
    auto it = c.history.members.find(spec.name);
    if (it != c.history.members.end()) ManagerClaim(spec, it->second, views);
  }
  for (const auto& spec : c.spec.members) {
    auto it = c.history.members.find(spec.name);
    if (it != c.history.members.end()) Upstream(spec, it->second, c.spec.members, views);
  }
  table.majority = Majority(views);
  for (auto& v : views) {
    v.disagrees = !table.majority.empty() && !v.names.empty() && v.names != table.majority;
  }
  return table;
}

}  // namespace sbd
