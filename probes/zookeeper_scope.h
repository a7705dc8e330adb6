// Patroni on ZooKeeper (issue 27): the lock store of a `kind: patroni` cluster whose DCS is
// ZooKeeper (`zookeeper:` beside `etcd:`). Patroni 3.0's ZooKeeper DCS (through kazoo) keeps
// under <namespace>/<scope>/ the leader (an ephemeral znode holding the leader's name, owned by
// its session), members/<name> (ephemeral, JSON as on etcd), config (JSON, the ttl) and
// initialize (the system identifier). Read with the shared single-threaded session on the loop.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "detector/config/config.h"
#include "probes/async_probe.h"
#include "probes/event_loop.h"
#include "probes/probe.h"

namespace sbd {

/// One znode of a scope as the C client gives it. Plain value type.
struct ScopeZnode {
  std::string data;                  ///< its data, when not above the cap (else empty)
  std::int64_t data_length = 0;      ///< as the stat says
  std::int64_t czxid = 0;            ///< the zxid that created it
  std::int64_t ephemeral_owner = 0;  ///< the session that owns it; 0: not ephemeral
};

/// Applies the znode `name` of a scope ("leader", "initialize", "config" or "members/<m>",
/// relative to <namespace>/<scope>/) to `view`, as the etcd scope store applies its keys:
/// the leader names `holder`, its czxid is `mod_revision` (the fencing token: a new leader
/// creates a new znode, and zxids only go up across the ensemble, where the znode's version
/// starts again at 0 with each leader), its session `lease_id` (hex). Data above
/// `max_data_bytes` is refused in `view.rejected`, except the leader's, which fails the read
/// (the holder cannot be told). Other names are ignored. Pure; thread-safe.
std::optional<ProbeFailure> ApplyScopeZnode(const std::string& name, const ScopeZnode& node,
                                            int max_data_bytes, LockRecord& view);

/// The znode path of a cluster's scope, "<namespace>/<scope>". Pure.
std::string PatroniScopePath(const ClusterSpec& spec);

class ZooKeeperScopeReader;

/// The lock store of a Patroni-on-ZooKeeper cluster: each read gets the leader, initialize and
/// config znodes and the members' (at most `max_children`, each bounded by `max_data_bytes`),
/// all by the deadline. The watch (an exists watch on the leader, a children watch on members/)
/// wakes a round at once. Never throws. Thread-safe for one Read() at a time.
class ZooKeeperScopeStore : public AsyncLockStore {
 public:
  /// `spec.patroni_zookeeper` must be set (the config guarantees it for this store).
  explicit ZooKeeperScopeStore(const ClusterSpec& spec, EventLoop& loop = EventLoop::Shared());
  ~ZooKeeperScopeStore() override;
  ZooKeeperScopeStore(const ZooKeeperScopeStore&) = delete;
  ZooKeeperScopeStore& operator=(const ZooKeeperScopeStore&) = delete;

  /// Starts a read (loop thread); `done` runs on the loop thread by `deadline`.
  void Start(SteadyClock::time_point deadline, Done done) override;
  EventLoop& loop() override { return loop_; }
  /// ZooKeeper watches on the leader znode and the members' children, on the read's session,
  /// set again after each event and each new session.
  std::unique_ptr<LockWatch> Watch(LockWatch::Changed on_change) override;

 private:
  EventLoop& loop_;
  std::shared_ptr<ZooKeeperScopeReader> reader_;
};

}  // namespace sbd
