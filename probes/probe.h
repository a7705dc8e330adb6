#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "probes/lock_watch.h"

namespace sbd {

using WallClock = std::chrono::system_clock;
using SteadyClock = std::chrono::steady_clock;

/// Why a probe produced no reading. Every value is a failure; there is no "ok" here, so a
/// probe result is either a reading or one of these, never both and never neither.
enum class ProbeFailureReason {
  kTimeout,         ///< the deadline passed before an answer arrived
  kRefused,         ///< nothing listens (connection refused / no such socket)
  kUnreachable,     ///< host lookup or routing failed
  kAuth,            ///< authentication or authorization rejected
  kProtocol,        ///< the server answered something we could not interpret
  kQuery,           ///< the connection worked but a query failed
  kConnectionLost,  ///< an established connection broke mid-probe
  kConfig,          ///< the member's own settings are unusable (e.g. unreadable password file)
  kStarting,        ///< the server says it is starting up or shutting down
  kInternal,        ///< anything else; the message says what
};

/// True when the failure itself shows the server accepts no writes: nothing listens, or the
/// server says it is starting up or shutting down. A timeout, a cut connection or an
/// unreachable host leaves the question open: such a member may still be writable.
bool RulesOutWrites(ProbeFailureReason reason);

/// Stable snake_case name used in metrics labels and logs.
const char* ReasonName(ProbeFailureReason reason);

/// A failed probe: the reason and a human message that never contains a secret.
struct ProbeFailure {
  ProbeFailureReason reason = ProbeFailureReason::kInternal;
  std::string message;
};

/// What a standby's WAL receiver (pg_stat_wal_receiver) says about the server it streams from.
/// Without pg_read_all_stats (pg_monitor has it) the server shows only that a receiver runs:
/// then `hidden` is true and every other field is empty, never a guessed value.
struct WalReceiverReading {
  bool hidden = false;
  std::string status;             ///< streaming, waiting, starting, stopping, ...
  std::string sender_host;        ///< host (or socket directory) it streams from; may be empty
  int sender_port = 0;            ///< 0 when unknown
  std::int64_t received_tli = 0;  ///< the timeline of the last WAL flushed; 0 when unknown
  std::string flushed_lsn;        ///< last WAL position flushed to disk, LSN text
  std::string latest_end_time;    ///< when the sender last reported its position, ISO-8601 UTC
};

/// One line of a timeline history file: the lineage left `parent_timeline` at `switch_lsn`.
struct TimelineSwitch {
  std::int64_t parent_timeline = 0;
  std::uint64_t switch_lsn = 0;  ///< byte offset
  std::string switch_lsn_text;   ///< as PostgreSQL prints it ("0/3000148")
};

/// What PostgreSQL said about itself, read in one round trip.
struct PostgresReading {
  bool in_recovery = true;
  bool read_only = true;
  /// Writable means not in recovery and transaction_read_only off.
  bool writable() const { return !in_recovery && !read_only; }
  std::string system_identifier;  ///< pg_control_system(): the lineage
  std::int64_t timeline = 0;      ///< the timeline of the latest checkpoint (or replay)
  std::string wal_lsn;            ///< current (primary) or last replayed (standby) LSN text
  std::uint64_t wal_bytes = 0;    ///< the same position as a byte offset
  int server_version = 0;         ///< server_version_num
  std::string postmaster_start;   ///< pg_postmaster_start_time() as ISO-8601 text
  int backend_pid = 0;            ///< the session that read it (pg_backend_pid())
  /// A standby's WAL receiver, when one runs (none on a primary or a disconnected standby).
  std::optional<WalReceiverReading> upstream;
  /// A writable member on a timeline above 1: the history of `timeline` (every parent and
  /// where the lineage left it, oldest first), read once per timeline from its history file.
  /// Empty otherwise, and when it could not be read (then `timeline_history_error` says why).
  std::vector<TimelineSwitch> timeline_history;
  std::string timeline_history_error;  ///< why the history is unknown; empty when known or unwanted
};

/// What a Redis server said about itself (INFO replication and INFO server), read in one
/// round trip. Plain value type.
struct RedisReading {
  std::string role;                      ///< "master" or "slave", as Redis spells it
  std::string master_replid;             ///< the replication id (the lineage)
  std::string master_replid2;            ///< the id it continued from; empty when none
  std::int64_t second_repl_offset = -1;  ///< where it left master_replid2; -1 when none
  std::int64_t master_repl_offset = 0;   ///< its replication offset
  std::string run_id;                    ///< changes at every restart
  std::string redis_version;
  int connected_replicas = 0;  ///< connected_slaves
  /// min_slaves_good_slaves: present only while min-replicas-to-write is configured.
  std::optional<int> good_replicas;
  /// min-replicas-to-write, when the server let us read it (CONFIG GET); unknown otherwise.
  std::optional<int> min_replicas_to_write;
  std::string master_host;         ///< a replica's upstream (master_host); empty on a master
  int master_port = 0;             ///< a replica's upstream port; 0 when none
  std::string master_link_status;  ///< a replica's link: "up" or "down"
  /// A master whose min-replicas-to-write is not met refuses writes (NOREPLICAS). With the
  /// setting unreadable, only zero good replicas proves it (the field shows only when it is >= 1).
  bool writes_blocked() const {
    if (!good_replicas) return false;
    if (min_replicas_to_write) return *good_replicas < *min_replicas_to_write;
    return *good_replicas == 0;
  }
};

/// What a candidate process says about an application lock (its claim metric, read by
/// probes/metrics_claim.h and adapted in probes/lease_adapters.h): whether it holds the lock
/// and with which token. Plain value type.
struct LockClaimReading {
  std::string lock;       ///< the lock's name, as the claim series labels it: the lineage
  bool claims = false;    ///< a series of the lock says 1
  bool competes = false;  ///< some series names the lock (1 or 0)
  /// The token it claims with: the claim's token label, else the candidate's configured
  /// identity; empty when neither. Raw bytes: compare, never show unescaped.
  std::string token;
};

/// What a member claims about the lock, in terms every kind shares. The verdict decides from
/// this alone; a kind's own reading (PostgresReading, RedisReading) is evidence beside it.
struct Claim {
  bool holds = false;   ///< acts as the holder: a writable PostgreSQL, a Redis master
  bool fenced = false;  ///< holds, but its own guard refuses writes (min-replicas-to-write)
  std::string lineage;  ///< PostgreSQL system identifier, Redis master_replid
  /// The lineage it continued from (Redis master_replid2); empty when none. Two claims whose
  /// lineage and previous lineage meet are one lineage.
  std::string previous_lineage;
  std::int64_t previous_lineage_offset = -1;  ///< where it left previous_lineage; -1 when none
  std::int64_t epoch = 0;                     ///< PostgreSQL timeline; 0 when the kind has none
  std::string token;                          ///< the holder's token, when the kind has one
  /// The session that read it, when an unchanged session proves the claim held in between
  /// (a PostgreSQL primary cannot return to recovery without a restart); empty otherwise.
  std::string session;
  /// True when holding and able to take writes.
  bool writable() const { return holds && !fenced; }
};

/// The claim of a PostgreSQL reading: writable, system identifier, timeline, backend session.
Claim ClaimOf(const PostgresReading& reading);
/// The claim of a candidate of an application lock: holds when it claims, the lock's name as
/// the lineage, its token.
Claim ClaimOf(const LockClaimReading& reading);
/// The claim of a Redis reading: master, replid/replid2, fenced by min-replicas-to-write. A
/// master can turn replica on the same connection, so no session proves continuity.
Claim ClaimOf(const RedisReading& reading);

/// One member as Patroni's GET /cluster lists it.
struct PatroniClusterMember {
  std::string name;
  std::string role;   ///< leader, replica, standby_leader, sync_standby (as Patroni says)
  std::string state;  ///< running, streaming, stopped, ...
  std::string api_url;
  std::string host;
  int port = 0;
  std::int64_t timeline = 0;
};

/// What a member's Patroni says about itself (GET /patroni) and its cluster (GET /cluster).
struct PatroniReading {
  std::string state;  ///< running, starting, stopped, ...
  std::string role;   ///< normalized: "primary" (also for Patroni's "master"),
                      ///< "replica", "standby_leader", ...
  std::int64_t timeline = 0;
  std::string system_identifier;        ///< database_system_identifier
  std::string scope;                    ///< patroni.scope
  std::string name;                     ///< patroni.name (Patroni 3.0 omits it: may be empty)
  std::optional<double> dcs_last_seen;  ///< unix seconds of its last successful DCS contact
  bool pause = false;
  bool cluster_unlocked = false;
  std::string cluster_leader;  ///< the member /cluster names as leader, if any
  std::vector<PatroniClusterMember> cluster_members;
};

/// One member as Patroni registered it in the DCS (<namespace>/<scope>/members/<name>).
struct DcsMember {
  std::string name;
  std::string conn_url;  ///< postgres://user@host:port/db (no password in Patroni's key)
  std::string api_url;
  std::string role;
  std::string state;
};

/// A lock's record, as its lock store keeps it: whom the store names as holder, the lease
/// left on that claim, the revision (epoch) it was written at, and the members registered
/// beside the lock. The etcd store fills it from one Patroni scope, read in one prefix range;
/// other stores fill the fields they have. (It was `DcsView`, after the DCS it was first read
/// from; every lock kind's store answers with one.)
struct LockRecord {
  std::string endpoint;           ///< the etcd endpoint that answered
  std::string holder;             ///< the leader key's value; empty when there is no key
  std::int64_t mod_revision = 0;  ///< the leader key's mod_revision (a fencing-token-like epoch)
  std::string lease_id;           ///< the leader key's lease (decimal text), "0" for none
  std::int64_t lease_ttl_remaining = -1;  ///< seconds left on the lease; -1 unknown/expired
  std::int64_t lease_granted_ttl = -1;
  std::string initialize;  ///< the system identifier the scope was bootstrapped with
  std::optional<std::int64_t> config_ttl;  ///< ttl from the scope's config key
  std::vector<DcsMember> members;
  /// What was read but ignored, each saying why ("members/evil: conn_url is not a string"):
  /// values anyone with write access to the DCS can set, which must not blind the view.
  std::vector<std::string> rejected;
  /// Stores kept by several keepers voting (Sentinel): each keeper that did not answer or
  /// named another holder than the majority, saying which. Evidence, never the record.
  std::vector<std::string> dissent;
  /// Stores that move the lock themselves (Sentinel's failover): true while the store says
  /// it is moving it now.
  bool handover_in_progress = false;
  /// The holder the store named before its latest change of holder, and when this reader saw
  /// the change; empty/unset when it has seen none.
  std::string previous_holder;
  std::optional<WallClock::time_point> holder_changed_at;
  /// How long after a change of holder the store itself still demotes the previous one
  /// (Sentinel reconfigures an old master that reports itself master); zero when it does not.
  std::chrono::milliseconds handover_bound{0};
  /// Stores that keep the holder's token rather than a member's name (an application lease's
  /// key): the token, raw bytes. The engine names as `holder` the member claiming with it.
  std::string holder_token;
  /// Stores that queue candidates (an etcd election or lock): the candidates waiting behind
  /// the holder, in the order they would take it ("<key> (revision N)", escaped). Evidence.
  std::vector<std::string> waiting;
  /// The store's own revision at the read (etcd's header revision); 0 when unknown. A lower
  /// one than before means the store went back in time (a restore from backup).
  std::int64_t store_revision = 0;
  /// Locks with a resource witness: the highest token the protected resource says it accepted
  /// (none when there is no witness or it was unreadable: then `rejected` says why).
  std::optional<std::int64_t> resource_token;
};

/// The timing of one reading: the answer was produced somewhere inside [sent, received].
struct ReadingWindow {
  WallClock::time_point sent_wall;
  SteadyClock::time_point sent;
  SteadyClock::time_point received;
  /// True when the two windows share at least one instant.
  bool Overlaps(const ReadingWindow& other) const {
    return sent <= other.received && other.sent <= received;
  }
  double Seconds() const { return std::chrono::duration<double>(received - sent).count(); }
};

/// One probe of one member: the timing plus either a reading or a failure.
struct Observation {
  std::string member;
  ReadingWindow window;
  /// The kind's reading (its claim is ClaimOf(reading)) or why there is none.
  std::variant<PostgresReading, RedisReading, LockClaimReading, ProbeFailure> result;
  /// Members with a manager only: what it (Patroni's REST API) claimed in the same round, read
  /// concurrently with PostgreSQL so that a hung API never hides the database.
  std::optional<std::variant<PatroniReading, ProbeFailure>> patroni;

  bool ok() const { return !std::holds_alternative<ProbeFailure>(result); }
  /// PostgreSQL's evidence (WAL, upstream, ...); null for a failure or another kind.
  const PostgresReading* reading() const { return std::get_if<PostgresReading>(&result); }
  /// Redis's evidence; null for a failure or another kind.
  const RedisReading* redis() const { return std::get_if<RedisReading>(&result); }
  /// An application lock candidate's claim; null for a failure or another kind.
  const LockClaimReading* lock_claim() const { return std::get_if<LockClaimReading>(&result); }
  const ProbeFailure* failure() const { return std::get_if<ProbeFailure>(&result); }
  /// The kind-neutral claim; nullopt for a failure.
  std::optional<Claim> claim() const;
  /// Writable only when seen to be; a failed probe is never writable and never "not writable".
  /// A fenced holder is not writable.
  bool seen_writable() const;
  /// Seen holding while its own guard refuses writes.
  bool seen_fenced() const;
};

/// Lets concurrent probes send their readings together, so that a confirmation re-probe
/// compares readings taken at the same instant even when one member had to reconnect first.
/// Each party arrives exactly once (connected or failed). Thread-safe.
class StartGate {
 public:
  explicit StartGate(int parties) : waiting_for_(parties) {}
  /// Marks this party ready, then waits until every party is ready or `deadline` passes.
  void ArriveAndWait(SteadyClock::time_point deadline);
  /// Marks this party ready (or gone) without waiting.
  void Arrive();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_for_;
};

/// A probe of one member. Implementations return data and never count holders; they
/// never throw past Probe(). Not thread-safe: the scheduler runs at most one Probe() per
/// instance at a time.
class MemberProbe {
 public:
  virtual ~MemberProbe() = default;
  /// Reads the member once, giving up at `deadline` (a timeout failure). With a `gate`, the
  /// reading is sent only once every other probe sharing the gate is ready to send too;
  /// the probe arrives at the gate exactly once on every path.
  virtual Observation Probe(SteadyClock::time_point deadline, StartGate* gate) = 0;
};

/// A lock store: where a lock's record lives (etcd for Patroni today). The scheduler reads it
/// once per round, beside the member probes, and again at confirmation. Implementations
/// return data and never count holders; they never throw past Read(). Not thread-safe: the
/// scheduler runs at most one Read() per instance at a time.
class LockStore {
 public:
  virtual ~LockStore() = default;
  /// Reads the lock's record once, giving up at `deadline` (a timeout failure).
  virtual std::variant<LockRecord, ProbeFailure> Read(SteadyClock::time_point deadline) = 0;
  /// Starts a watch that calls `on_change` when the record's holder changes, or returns
  /// nullptr when the kind offers none (the default). Called once, before the first Read();
  /// the watch shares no state with Read(), so both may run at once.
  virtual std::unique_ptr<LockWatch> Watch(LockWatch::Changed on_change) {
    (void)on_change;
    return nullptr;
  }
};

/// What a member's manager (Patroni's REST API today) says about the member and its
/// cluster, read beside the member probe so that a hung manager never hides the database.
/// Implementations never throw past Read(). Not thread-safe: the scheduler runs at most one
/// Read() per instance at a time.
class ManagerProbe {
 public:
  virtual ~ManagerProbe() = default;
  /// Reads the manager once, giving up at `deadline` (a timeout failure).
  virtual std::variant<PatroniReading, ProbeFailure> Read(SteadyClock::time_point deadline) = 0;
};

}  // namespace sbd
