#include "detector/engine/discovery.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "detector/common/logfmt.h"
#include "detector/common/network_text.h"
#include "probes/http_json.h"

namespace sbd {

size_t DiscoveredCount(const ClusterSpec& spec) {
  return static_cast<size_t>(std::count_if(spec.members.begin(), spec.members.end(),
                                           [](const MemberSpec& m) { return m.discovered; }));
}

std::optional<MemberSpec> DiscoveredMember(const ClusterSpec& spec, const DcsMember& registered) {
  const std::string& url = registered.conn_url;
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) return std::nullopt;
  const size_t start = scheme + 3;
  size_t end = url.find('/', start);
  if (end == std::string::npos) end = url.size();
  std::string authority = url.substr(start, end - start);
  if (const auto at = authority.rfind('@'); at != std::string::npos) {
    authority = authority.substr(at + 1);
  }
  const HostPort at = SplitHostPort(authority);
  if (at.host.empty()) return std::nullopt;
  return DiscoveredAt(spec, registered.name, at, registered.api_url);
}

MemberSpec DiscoveredAt(const ClusterSpec& spec, const std::string& name, const HostPort& at,
                        const std::string& api_url) {
  MemberSpec member = MemberAt(name, at, spec.discovery.dsn, spec.discovery.password_file,
                               spec.discovery.password_env);
  if (!api_url.empty()) member.patroni_url = UrlBase(api_url);
  member.discovered = true;
  return member;
}

DiscoveryPlan PlanDiscovery(const ClusterSpec& spec, const LockRecord& view,
                            const std::function<bool(size_t)>& has_manager) {
  DiscoveryPlan plan;
  size_t discovered = DiscoveredCount(spec);
  for (const DcsMember& registered : view.members) {
    const auto named = [&](const MemberSpec& m) { return m.name == registered.name; };
    auto known = std::find_if(spec.members.begin(), spec.members.end(), named);
    if (known != spec.members.end()) {
      // A configured member without a REST URL gets the one Patroni registered.
      const size_t index = static_cast<size_t>(known - spec.members.begin());
      const bool planned = std::any_of(plan.managers.begin(), plan.managers.end(),
                                       [&](const auto& m) { return m.first == index; });
      if (!planned && !has_manager(index) && !registered.api_url.empty()) {
        plan.managers.emplace_back(index, UrlBase(registered.api_url));
      }
      continue;
    }
    if (!spec.discovery.enabled) continue;
    if (std::any_of(plan.added.begin(), plan.added.end(), named)) continue;
    auto member = DiscoveredMember(spec, registered);
    if (!member) continue;
    // Anyone who can write to the record can register members: never probe without limit.
    if (discovered >= static_cast<size_t>(spec.discovery.max_members)) {
      plan.rejected.push_back(registered.name);
      continue;
    }
    spdlog::info("cluster={} msg=\"discovered member\" member=\"{}\" address=\"{}\"", spec.name,
                 LogfmtEscape(member->name), LogfmtEscape(RedactedUrl(member->address)));
    plan.added.push_back(std::move(*member));
    ++discovered;
  }
  return plan;
}

void TrackAbsence(const ClusterSpec& spec, const LockRecord& view,
                  std::map<std::string, WallClock::time_point>& absent_since,
                  WallClock::time_point now) {
  for (const auto& m : spec.members) {
    if (!m.discovered) continue;
    const bool listed = std::any_of(view.members.begin(), view.members.end(),
                                    [&](const DcsMember& r) { return r.name == m.name; });
    if (listed) {
      absent_since.erase(m.name);
    } else {
      absent_since.emplace(m.name, now);
    }
  }
}

std::vector<size_t> ExpireDiscovered(ClusterSnapshot& state,
                                     std::map<std::string, WallClock::time_point>& absent_since,
                                     WallClock::time_point now) {
  ClusterSpec& spec = state.spec;
  const auto limit = spec.discovery.expire_after;
  std::vector<size_t> dropped;
  for (size_t i = spec.members.size(); i-- > 0;) {
    const MemberSpec& m = spec.members[i];
    auto absent = absent_since.find(m.name);
    if (!m.discovered || absent == absent_since.end() || now - absent->second < limit) continue;
    const auto history = state.history.members.find(m.name);
    const auto last_ok = history != state.history.members.end() && history->second.last_ok
                             ? *history->second.last_ok
                             : absent->second;
    if (now - last_ok < limit) continue;
    spdlog::info(
        "cluster={} msg=\"discovered member expired: gone from the DCS and unreadable\" "
        "member=\"{}\" for={}s",
        spec.name, LogfmtEscape(m.name),
        std::chrono::duration_cast<std::chrono::seconds>(limit).count());
    state.history.members.erase(m.name);
    state.counters.erase(m.name);
    absent_since.erase(absent);
    spec.members.erase(spec.members.begin() + static_cast<std::ptrdiff_t>(i));
    ++state.discovered_expired;
    dropped.push_back(i);
  }
  return dropped;
}

void RecordDiscoveryRejected(ClusterSnapshot& state, std::vector<std::string> rejected) {
  if (!rejected.empty() && state.discovery_rejected != rejected) {
    spdlog::warn(
        "cluster={} msg=\"DCS registers more members than discovery.max_members; not probing "
        "the rest\" max_members={} not_probed={}",
        state.spec.name, state.spec.discovery.max_members, rejected.size());
  }
  state.discovery_rejected = std::move(rejected);
}

}  // namespace sbd
