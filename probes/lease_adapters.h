// Application leases (issue 12) as a lock kind of the engine: the claim probe as a member
// probe, the Redis lease reader as a lock store.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/async_probe.h"
#include "probes/metrics_claim.h"
#include "probes/probe.h"
#include "probes/redis_lease.h"

namespace sbd {

/// The claim query of a redis_lease cluster, as LeaseClaimProbe takes it.
ClaimQuery ClaimQueryOf(const RedisLeaseSpec& spec);
/// The claim query of a k8s_lease cluster (client-go's metric by default), likewise.
ClaimQuery ClaimQueryOf(const K8sLeaseSpec& spec);

/// The claim query of an etcd_election cluster, likewise.
ClaimQuery ClaimQueryOf(const EtcdElectionSpec& spec);
/// The claim query of a zookeeper_lock cluster.
ClaimQuery ClaimQueryOf(const ZooKeeperLockSpec& spec);

/// One candidate's claim (its metrics_url, read with ClaimRequest, found by FindClaim) as an
/// Observation holding a LockClaimReading: the lock's name as lineage; its token is the token
/// label's value, else the member's configured identity. Runs on an EventLoop (LoopHttpClient):
/// a hung or hostile endpoint holds no thread, and its reading fails with the bound it broke.
/// With a gate, arrives at once and sends when the gate opens (the kept connection is normally
/// ready by then). Never throws. The object may be destroyed on any thread; Start() on the
/// loop thread only, one at a time.
class LeaseClaimProbe : public AsyncMemberProbe {
 public:
  LeaseClaimProbe(const ClusterSpec& spec, const MemberSpec& member,
                  EventLoop& loop = EventLoop::Shared());
  /// The same over any claim query (an etcd election's): `query.lock` is the lineage.
  LeaseClaimProbe(const MemberSpec& member, const ClaimQuery& query,
                  EventLoop& loop = EventLoop::Shared());
  ~LeaseClaimProbe() override;
  LeaseClaimProbe(const LeaseClaimProbe&) = delete;
  LeaseClaimProbe& operator=(const LeaseClaimProbe&) = delete;

  void Start(SteadyClock::time_point deadline, std::shared_ptr<LoopGate> gate, Done done) override;
  EventLoop& loop() override { return loop_; }

 private:
  struct Session;
  EventLoop& loop_;
  std::shared_ptr<Session> session_;
};

/// A lease's record as the engine's LockRecord: `holder_token` the held key's value (whole, or
/// nothing when cut short), `holder` the member whose configured identity it is (else empty:
/// the engine names the claimer carrying the token), `lease_ttl_remaining` its PTTL rounded up
/// to seconds (-1 when gone or without TTL). A key without TTL, of another type, cut short, or
/// several held at once, and a SCAN stopped at a cap, are each said in `rejected` (escaped).
/// Pure; thread-safe.
LockRecord LeaseRecordAsView(const LeaseRecord& record, const std::vector<MemberSpec>& members);

/// The lock store of a redis_lease cluster: LoopLeaseReader on the configured key or pattern,
/// on the event loop (a trickling server holds no thread), read only, its password read from
/// the file or environment at each connect. Never throws. Start() on the loop thread, one at a
/// time; the object may be destroyed on any thread.
class RedisLeaseStore : public AsyncLockStore {
 public:
  explicit RedisLeaseStore(const ClusterSpec& spec, EventLoop& loop = EventLoop::Shared());
  ~RedisLeaseStore() override;
  RedisLeaseStore(const RedisLeaseStore&) = delete;
  RedisLeaseStore& operator=(const RedisLeaseStore&) = delete;
  void Start(SteadyClock::time_point deadline, Done done) override;
  EventLoop& loop() override { return loop_; }

 private:
  RedisLeaseSpec spec_;
  std::vector<MemberSpec> members_;
  EventLoop& loop_;
  std::shared_ptr<LoopLeaseReader> reader_;  ///< the loop's; null until a password is read
  /// Set (on the loop) when a read failed on its login: the password is read again.
  std::shared_ptr<bool> reread_ = std::make_shared<bool>(false);
};

}  // namespace sbd
