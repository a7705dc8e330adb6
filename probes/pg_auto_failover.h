#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/async_probe.h"
#include "probes/probe.h"

namespace sbd {

/// How long the monitor's own transitions may excuse a second writable member. The monitor
/// promotes a secondary only once the old primary has reported `demoted` or has had
/// `primary_demote_timeout` (30 s) to demote itself, and a partitioned keeper demotes itself
/// after `network_partition_timeout` (20 s): the design leaves no overlap. What remains is
/// the lag of the keepers' reports (one loop a second) and of this detector's rounds, so an
/// overlap past a few keeper loops is not a handover: 10 s.
constexpr std::chrono::milliseconds kPgAutoFailoverHandoverBound{10000};

/// A read with more nodes than this in the group fails: the holder could not be told.
constexpr std::size_t kMaxMonitorNodes = 1000;

/// One row of MonitorNodesQuery(), each cell as text (nullopt for SQL NULL): the newest event
/// id of the formation, then nodeid, nodename, nodehost, nodeport, goalstate, reportedstate and
/// reportedlsn.
using MonitorRow = std::vector<std::optional<std::string>>;

/// The states of pg_auto_failover 2.0 in which the monitor lets a node take writes: `single`,
/// `wait_primary`, `primary`, `join_primary` and `apply_settings` (a primary applying new
/// settings). Every other state is a standby's, a stopped node's or a transition's. Pure.
bool PrimaryLikeState(const std::string& state);

/// The monitor's transitions of the lock: a primary draining or demoting (`draining`,
/// `demote_timeout`, `prepare_maintenance`) and a standby chosen to take over
/// (`prepare_promotion`, `stop_replication`, `report_lsn`, `fast_forward`). Pure.
bool HandoverState(const std::string& state);

/// True for the 22 states of the `pgautofailover.replication_state` type of 2.0. Pure.
bool KnownState(const std::string& state);

/// The statement the store sends: $1 the formation, $2 the group. At most kMaxMonitorNodes + 1
/// rows, always one at least (the node cells NULL when the group has none).
const char* MonitorNodesQuery();

/// Pure: the monitor's record from its rows. The holder is the node whose goal state is
/// primary-like; with none, the node the monitor is promoting (`prepare_promotion`,
/// `stop_replication`); two such nodes name none, said in `rejected`. A node is named by the
/// member whose name is its `nodename`, else whose address is `nodehost:nodeport`, else by its
/// nodename. `mod_revision` is the formation's newest event id (a bigserial: it only goes up,
/// and every goal change the monitor makes inserts an event). `handover_in_progress` while a
/// node is in a transition state, or its goal and report differ in being primary-like. A
/// hostile row (NULLs, wrong types, unknown states) is skipped and said in `rejected`; more
/// than kMaxMonitorNodes rows, or rows of another shape, fail the read. With `discover`, each
/// node no member names is offered to discovery in `members` (conn_url from nodehost and
/// nodeport, DiscoverableAddress), or said in `rejected` when its name, host or port is unfit.
std::variant<LockRecord, ProbeFailure> FoldMonitorNodes(const std::vector<MonitorRow>& rows,
                                                        const std::vector<MemberSpec>& members,
                                                        const PgAutoFailoverSpec& spec,
                                                        bool discover = false);

/// What one store remembers between reads: the holder it last read, the one before and when
/// that changed, and since when a transition has been reported.
struct MonitorHandoverClock {
  std::string holder;
  std::string previous_holder;
  std::optional<WallClock::time_point> holder_changed_at;
  std::optional<WallClock::time_point> handover_since;
};

/// Pure but for `clock`: fills the view's handover fields (previous holder, its change, the
/// bound) and ends `handover_in_progress` once a transition has been reported for longer than
/// kPgAutoFailoverHandoverBound, saying so in `dissent`.
void TrackMonitorHandover(LockRecord& view, MonitorHandoverClock& clock, WallClock::time_point now);

/// Where the record is kept, for people: "pg_auto_failover monitor <address>, formation F
/// group G".
std::string PgAutoFailoverRecord(const PgAutoFailoverSpec& spec);

/// The monitor's record of one formation group, read on the event loop with non-blocking libpq:
/// one connection per read (connect, one statement, close), all bounded by the deadline, so a
/// hung monitor holds no thread and leaves no session behind. Read-only: the detector's role
/// needs SELECT on pgautofailover.node and pgautofailover.event (autoctl_node has it). Start()
/// on the loop thread, one at a time; the object may be destroyed on any thread.
class PgAutoFailoverStore : public AsyncLockStore {
 public:
  PgAutoFailoverStore(const ClusterSpec& spec, EventLoop& loop = EventLoop::Shared());
  ~PgAutoFailoverStore() override;
  PgAutoFailoverStore(const PgAutoFailoverStore&) = delete;
  PgAutoFailoverStore& operator=(const PgAutoFailoverStore&) = delete;
  void Start(SteadyClock::time_point deadline, Done done) override;
  EventLoop& loop() override { return loop_; }

 private:
  struct Session;
  EventLoop& loop_;
  std::shared_ptr<Session> session_;
};

}  // namespace sbd
