#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "probes/async_probe.h"
#include "probes/etcd_gateway.h"
#include "probes/probe.h"

namespace sbd {

/// The /v3/lease/timetolive answer `lease` applied to `view`: its time left and granted TTL
/// (a failed fetch leaves the view as it is; an answer of the wrong shape is said in
/// `view.rejected`). The lease is evidence, not the verdict. Pure.
void ApplyEtcdLease(const std::variant<nlohmann::json, ProbeFailure>& lease, LockRecord& view);

/// A Patroni member's registration (`members/<name>`'s JSON value) added to `view.members`, or
/// the reason it was refused added to `view.rejected`. Shared by every DCS Patroni runs on. Pure.
void ReadPatroniMember(const std::string& name, const std::string& value, LockRecord& view);
/// The scope's `config` JSON value: its ttl into `view.config_ttl`, or a reason into
/// `view.rejected`. Pure.
void ReadPatroniConfig(const std::string& value, LockRecord& view);

/// Reads one Patroni scope from etcd 3.4's v3 JSON gateway: a single prefix range over
/// <namespace>/<scope>/ (leader, initialize, config, members/*), then the leader key's lease
/// (POST /v3/lease/timetolive). Endpoints are tried in turn, starting with the last one that
/// answered, each with its share of the deadline. Read-only. The lock store of Patroni
/// clusters. Every request runs on the event loop (LoopHttpClient, EtcdGatewayReader), bounded
/// as a whole. Never throws. The object may be destroyed on any thread; Start() on the loop
/// thread only, one at a time.
class EtcdScopeProbe : public AsyncLockStore {
 public:
  EtcdScopeProbe(std::vector<std::string> endpoints, std::string dcs_namespace, std::string scope,
                 EventLoop& loop = EventLoop::Shared());
  ~EtcdScopeProbe() override;
  EtcdScopeProbe(const EtcdScopeProbe&) = delete;
  EtcdScopeProbe& operator=(const EtcdScopeProbe&) = delete;

  void Start(SteadyClock::time_point deadline, Done done) override;
  EventLoop& loop() override { return loop_; }
  /// An EtcdKeyWatch on the scope's leader key, on the same endpoints.
  std::unique_ptr<LockWatch> Watch(LockWatch::Changed on_change) override;

  /// Parses a /v3/kv/range answer for the scope's prefix into a view (no lease TTL yet).
  static std::variant<LockRecord, ProbeFailure> ParseRange(const nlohmann::json& body,
                                                           const std::string& prefix);

 private:
  EventLoop& loop_;
  std::vector<std::string> endpoints_;
  std::string prefix_;  // "<namespace>/<scope>/"
  std::shared_ptr<EtcdGatewayReader> reader_;
};

}  // namespace sbd
