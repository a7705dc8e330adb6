#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/async_probe.h"
#include "probes/probe.h"

namespace sbd {

/// Rows of repmgr.nodes read from one copy; a copy with more fails its read (the primary
/// cannot be told from a part of the table). The query asks for one more to know.
constexpr int kMaxRepmgrNodes = 100;
/// The longest node_name and conninfo read as such; longer ones reject their row.
constexpr size_t kMaxRepmgrNameBytes = 128;
constexpr size_t kMaxRepmgrConninfoBytes = 1024;

/// One row of repmgr.nodes, validated. `address` is host:port from its conninfo (libpq's own
/// parser), empty when it has none; the conninfo itself is never kept: it may hold a password.
struct RepmgrNode {
  std::int64_t node_id = 0;
  std::string node_name;
  std::string type;  ///< primary, standby or witness
  bool active = false;
  std::optional<std::int64_t> upstream_node_id;
  std::string address;
};

/// One member's copy of repmgr's record: its nodes and its count of successful promotions.
struct RepmgrCopy {
  std::vector<RepmgrNode> nodes;
  /// Successful `standby_promote` events in this copy's repmgr.events: the epoch.
  std::int64_t promotions = 0;
  /// pg_is_in_recovery() of the server the copy was read from; unknown when it had no row.
  std::optional<bool> in_recovery;
  std::vector<std::string> rejected;  ///< rows skipped, each saying why
  /// Read from repmgr's witness node. repmgrd copies only repmgr.nodes to a witness (every
  /// witness_sync_interval); its repmgr.events never sees a promotion, so `promotions` is not
  /// its epoch: FoldRepmgrCopies dates it by the member copies instead.
  bool witness = false;
};

/// The statement one copy is read with: the nodes (names and conninfo cut in SQL, one row past
/// the cap) and, on every row, the promotion count and whether the server is in recovery.
std::string RepmgrCopyQuery();

/// Pure: one copy from the answer to RepmgrCopyQuery(): 8 columns, each row checked (a row of
/// wrong types or NULLs is rejected, saying why); more than kMaxRepmgrNodes rows or another
/// shape is a failure.
std::variant<RepmgrCopy, ProbeFailure> ParseRepmgrCopy(const PGresult* result);

/// Pure: the record from every member's copy, in the order of `members`. The copies at the
/// highest promotion count are the newest word; the primary a strict majority of them names
/// (mapped to a member) is the holder, and that count the epoch. A witness's copy has no count
/// of its own: it is as new as the newest member copy naming the same primary, and votes only
/// then (a copy no member's copy agrees with is behind, whatever it names). Every other copy is
/// dissent. Nothing readable, or no majority, is a failure.
std::variant<LockRecord, ProbeFailure> FoldRepmgrCopies(
    const std::vector<MemberSpec>& members,
    const std::vector<std::variant<RepmgrCopy, ProbeFailure>>& copies);

/// How long a promotion repmgr has not yet written into its record keeps the record from being
/// read (RepmgrRecordLag). repmgr (`standby promote`, by hand or from repmgrd) promotes the server
/// first and writes the nodes row after it has left recovery, so for a moment the new primary's
/// own copy still names the old one; a server promoted outside repmgr (pg_ctl promote) never
/// gets its row, and past the bound the record is read as it stands. 10 s.
constexpr std::chrono::milliseconds kRepmgrRecordLagBound{10000};

/// When each member was first seen promoted ahead of its own copy of the record.
struct RepmgrLagClock {
  std::map<std::string, WallClock::time_point> since;
};

/// A promotion not yet in the record: a member out of recovery whose own copy (the record of the
/// server it was read from) does not name it the primary. While one is seen, for at most
/// kRepmgrRecordLagBound from when it was first seen, the record names the member that is being
/// replaced and the read fails with a reason instead (naming the new primary the zombie, or
/// fencing it, would be wrong); past the bound, or once its copy names it, nullopt and the copies
/// are folded as usual. Updates `clock`. Pure but for `clock`.
std::optional<ProbeFailure> RepmgrRecordLag(
    const std::vector<MemberSpec>& members,
    const std::vector<std::variant<RepmgrCopy, ProbeFailure>>& copies, RepmgrLagClock& clock,
    WallClock::time_point now);

/// What repmgr's copies register, for discovery (`discover: true`): every node any readable copy
/// lists but witnesses, one per name and per address, that no configured member stands for (by
/// address or name), checked by DiscoverableAddress. `registered` offers each to the scheduler's
/// discovery (conn_url from the conninfo's host and port; nothing else of the conninfo is
/// kept); the first `discovery.max_members` of them are also `copies`, servers whose copy of the
/// record is read (discovery's dsn and credentials); a node skipped says why in `rejected`.
struct RepmgrDiscovery {
  std::vector<DcsMember> registered;
  std::vector<MemberSpec> copies;
  std::vector<std::string> rejected;
};

/// Pure: the nodes `copies` (read from `readers`, index for index) register, for discovery.
RepmgrDiscovery DiscoverRepmgrNodes(
    const std::vector<MemberSpec>& configured, const std::vector<MemberSpec>& readers,
    const std::vector<std::variant<RepmgrCopy, ProbeFailure>>& copies,
    const DiscoverySpec& discovery);

/// A store's discovery settings: off unless `discovery.enabled`. `seeds` (host:port) are read,
/// with discovery's settings, only while the store knows no member to read: their copies
/// find the nodes, and are never folded themselves (a seed is no member, and has no name).
struct RepmgrDiscoverySettings {
  DiscoverySpec discovery;
  std::vector<std::string> seeds;
};

/// repmgr's record of a PostgreSQL cluster: repmgr.nodes and repmgr.events read from every
/// member's copy of the metadata database at once, on the event loop with non-blocking libpq
/// (one connection per copy and read, each bounded by the deadline), folded by
/// FoldRepmgrCopies, unless RepmgrRecordLag holds the read back. With discovery, the copies of
/// the nodes found at the previous read (DiscoverRepmgrNodes) are read beside the members', and
/// the view registers them; with no member known, the seeds are read first, in the same read.
/// With a `witness` (repmgr's witness node), its copy is read last beside the others' and folded
/// as one more copy: it stands for no node (MemberOf never maps to it) and, never promoted, is
/// left out of RepmgrRecordLag. Read-only. Start() on the loop thread, one at a time; the object
/// may be destroyed on any thread.
class RepmgrStore : public AsyncLockStore {
 public:
  RepmgrStore(std::vector<MemberSpec> members, std::string database, Millis timeout,
              EventLoop& loop = EventLoop::Shared(), RepmgrDiscoverySettings discovery = {},
              std::optional<MemberSpec> witness = std::nullopt);
  ~RepmgrStore() override;
  RepmgrStore(const RepmgrStore&) = delete;
  RepmgrStore& operator=(const RepmgrStore&) = delete;
  void Start(SteadyClock::time_point deadline, Done done) override;
  EventLoop& loop() override { return loop_; }

 private:
  struct Session;
  EventLoop& loop_;
  std::shared_ptr<Session> session_;
};

}  // namespace sbd
