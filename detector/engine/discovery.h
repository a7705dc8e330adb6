#pragma once

// Discovery: the members a lock record registers (Patroni's members/, repmgr's nodes, the
// pg_auto_failover monitor's nodes) turned into members to probe, capped by
// discovery.max_members, and dropped once gone from the record and unreadable for
// discovery.expire_after. Pure but for logging: the scheduler makes and drops the probes.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "detector/engine/cluster_state.h"
#include "probes/probe.h"

namespace sbd {

/// A member found in the lock record, with the cluster's discovery settings; nullopt when its
/// conn_url (postgres://[user@]host:port/dbname: only host and port are taken) has no host.
std::optional<MemberSpec> DiscoveredMember(const ClusterSpec& spec, const DcsMember& registered);
/// A discovered member at `at`, with the cluster's discovery settings (dsn, credentials) and
/// its REST API at `api_url` (may be empty).
MemberSpec DiscoveredAt(const ClusterSpec& spec, const std::string& name, const HostPort& at,
                        const std::string& api_url);

/// How many of `spec`'s members were discovered.
size_t DiscoveredCount(const ClusterSpec& spec);

/// What one lock record changes in a cluster's members.
struct DiscoveryPlan {
  /// Configured members with no manager that get the REST URL the record registered for them:
  /// index into spec.members, and the URL.
  std::vector<std::pair<size_t, std::string>> managers;
  /// Members to probe from now on (discovery on), within discovery.max_members.
  std::vector<MemberSpec> added;
  /// Members registered beyond discovery.max_members: named, never probed.
  std::vector<std::string> rejected;
};

/// Pure: the plan for `view`'s registered members. `has_manager(i)`: spec.members[i] already
/// has a manager probe.
DiscoveryPlan PlanDiscovery(const ClusterSpec& spec, const LockRecord& view,
                            const std::function<bool(size_t)>& has_manager);

/// Marks each discovered member of `spec` absent from `view` since `now` (kept if already), or
/// present again. Pure.
void TrackAbsence(const ClusterSpec& spec, const LockRecord& view,
                  std::map<std::string, WallClock::time_point>& absent_since,
                  WallClock::time_point now);

/// Drops from `state` every discovered member absent from the record and unreadable for
/// discovery.expire_after (a zombie's key expires with its lease, and that is exactly when it
/// must stay watched, so absence alone never drops it): its spec, history and counters, and
/// its absence; logs each and counts it. Returns the indexes dropped, highest first, for the
/// caller's own per-member slots.
std::vector<size_t> ExpireDiscovered(ClusterSnapshot& state,
                                     std::map<std::string, WallClock::time_point>& absent_since,
                                     WallClock::time_point now);

/// Logs the members registered beyond max_members when the list changes, and keeps it.
void RecordDiscoveryRejected(ClusterSnapshot& state, std::vector<std::string> rejected);

}  // namespace sbd
