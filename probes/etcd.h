#pragma once

#include <atomic>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "probes/probe.h"

namespace sbd {

/// Fills `view`'s lease fields from `/v3/lease/timetolive` of its `lease_id` on `endpoint`.
/// The lease is evidence, not the verdict: a failed read leaves the time left unknown, and an
/// answer of the wrong shape is said in `view.rejected`.
void ReadEtcdLease(const std::string& endpoint, SteadyClock::time_point deadline, DcsView& view);
/// The /v3/lease/timetolive answer `lease` applied to `view` as ReadEtcdLease applies it (a
/// failed fetch leaves the view as it is). Pure.
void ApplyEtcdLease(const std::variant<nlohmann::json, ProbeFailure>& lease, DcsView& view);

/// Reads through `endpoints` in turn, from `preferred` (updated to the one that answered), each
/// remaining endpoint given an equal share of what is left of `deadline`, so that one hung
/// endpoint cannot use it all up. A failure names the endpoint that gave it (the last one).
std::variant<DcsView, ProbeFailure> ReadEtcdEndpoints(
    const std::vector<std::string>& endpoints, size_t& preferred, SteadyClock::time_point deadline,
    const std::function<std::variant<DcsView, ProbeFailure>(const std::string&,
                                                            SteadyClock::time_point)>& read);

/// Reads one Patroni scope from etcd 3.4's v3 JSON gateway: a single prefix range over
/// <namespace>/<scope>/ (leader, initialize, config, members/*), then the leader key's lease
/// (POST /v3/lease/timetolive). Endpoints are tried in turn, starting with the last one that
/// answered, each with its share of the deadline. Read-only. The lock store of Patroni
/// clusters. Safe to call from one thread at a time.
class EtcdScopeProbe : public LockStore {
 public:
  EtcdScopeProbe(std::vector<std::string> endpoints, std::string dcs_namespace, std::string scope);
  std::variant<DcsView, ProbeFailure> Read(SteadyClock::time_point deadline) override;
  /// An EtcdKeyWatch on the scope's leader key, on the same endpoints.
  std::unique_ptr<LockWatch> Watch(LockWatch::Changed on_change) override;

  /// Parses a /v3/kv/range answer for the scope's prefix into a view (no lease TTL yet).
  static std::variant<DcsView, ProbeFailure> ParseRange(const nlohmann::json& body,
                                                        const std::string& prefix);

 private:
  std::variant<DcsView, ProbeFailure> ReadFrom(const std::string& endpoint,
                                               SteadyClock::time_point deadline) const;

  std::vector<std::string> endpoints_;
  std::string prefix_;  // "<namespace>/<scope>/"
  size_t preferred_ = 0;
};

}  // namespace sbd
