// ZooKeeper's lock and election recipes (issue 27) as a lock kind: the candidates'
// ephemeral-sequential children under one lock path, read with the single-threaded C client on
// the event loop. The lowest sequence holds, and the holder child's czxid is the fencing token.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/async_probe.h"
#include "probes/event_loop.h"
#include "probes/probe.h"

namespace sbd {

/// The longest child name read as a candidate's; longer ones are refused.
constexpr size_t kMaxLockChildNameBytes = 256;

/// Which recipe wrote a candidate's child.
enum class LockRecipe {
  kCurator,  ///< InterProcessMutex ("[_c_<uuid>-]lock-<seq>"), LeaderLatch ("...latch-<seq>")
  kKazoo,    ///< Lock and Election ("<uuid>__lock__<seq>"; "__election__" also read)
};

/// One candidate's child as its name tells it. Plain value type.
struct LockChild {
  std::string name;
  LockRecipe recipe = LockRecipe::kKazoo;
  std::int64_t sequence = 0;  ///< the server's sequence suffix, 0 to 2^31-1
};

/// What a child name is: a candidate's, a foreign node (ignored, as the recipes ignore it), or
/// one refused with its reason (too long, not UTF-8, a recipe's form with a bad sequence).
struct ChildName {
  enum class Kind { kCandidate, kForeign, kRefused };
  Kind kind = Kind::kForeign;
  LockChild child;     ///< kCandidate only
  std::string reason;  ///< kRefused only: why, with the name escaped
};

/// Reads one child name of the lock path. Pure; thread-safe.
ChildName ParseLockChildName(const std::string& name);

/// The candidates among `names` in the order they would hold (lowest sequence first), and in
/// `view` the waiting list (escaped, capped), a rejected entry per refused name and one for
/// the foreign names. Pure; thread-safe.
std::vector<LockChild> OrderCandidates(const std::vector<std::string>& names, LockRecord& view);

/// The holder child's facts, read after its name: they fill `view`'s holder fields.
struct LockHolderNode {
  std::int64_t czxid = 0;            ///< the fencing token
  std::int64_t ephemeral_owner = 0;  ///< the session that owns it; 0: not ephemeral
  std::string data;                  ///< its data (the candidate's identifier), when not too big
  std::int64_t data_length = 0;      ///< as the stat says
};

/// Fills `view` from the holder's node: `holder_token` and `mod_revision` its czxid,
/// `lease_id` its session (hex), `holder` the member whose identity is its data. A node that
/// is not ephemeral, or data above `max_data_bytes`, is said in `rejected`. Pure; thread-safe.
void FillHolder(const LockChild& child, const LockHolderNode& node, int max_data_bytes,
                const std::vector<MemberSpec>& members, LockRecord& view);

/// The record of a zookeeper_lock cluster, for people.
std::string ZooKeeperLockRecord(const ZooKeeperLockSpec& spec);

class ZooKeeperLockReader;
struct ZooKeeperWitness;

/// The lock store of a zookeeper_lock cluster. Its core is asynchronous (ZooKeeperLockReader,
/// on the event loop: one session per cluster, no thread of its own); Read() posts a read to
/// the loop and waits for it, bounded by the deadline. Never throws. Thread-safe for one
/// Read() at a time (the scheduler's contract). With a resource witness, its token is read
/// after the lock path, by the same deadline (`resource_token`; a failure is said in
/// `rejected`), on the loop too.
class ZooKeeperLockStore : public AsyncLockStore {
 public:
  ZooKeeperLockStore(const ClusterSpec& spec, EventLoop& loop = EventLoop::Shared());
  ~ZooKeeperLockStore() override;
  ZooKeeperLockStore(const ZooKeeperLockStore&) = delete;
  ZooKeeperLockStore& operator=(const ZooKeeperLockStore&) = delete;

  /// Starts a read (loop thread); `done` runs on the loop thread by `deadline`. The scheduler
  /// starts it on the loop (no pool thread waits on ZooKeeper); Read() is the blocking form.
  void Start(SteadyClock::time_point deadline, Done done) override;
  EventLoop& loop() override { return loop_; }
  /// A ZooKeeper watch on the lock path's children (or on its creation, while it is missing),
  /// on the same session and loop as the reads, re-armed after each change and each new session.
  std::unique_ptr<LockWatch> Watch(LockWatch::Changed on_change) override;

 private:
  EventLoop& loop_;
  std::shared_ptr<ZooKeeperLockReader> reader_;
  std::shared_ptr<ZooKeeperWitness> witness_;  ///< null without a resource witness
};

}  // namespace sbd
