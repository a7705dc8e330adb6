#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "probes/probe.h"

namespace sbd {

/// A cluster's verdict, from best to worst.
enum class Verdict {
  kHealthy,     ///< exactly one writable member of the lineage, every member seen
  kSuppressed,  ///< a finding that an active declaration explains (see Assessment::suppressions)
  kUnknown,     ///< some member could not be read, so "healthy" cannot be claimed
  kNoPrimary,   ///< every member read, none writable
  kDrift,       ///< a writable member of another lineage sits inside the configured cluster
  kSuspected,   ///< one writable plus one last seen writable and now unreadable
  kSplitBrain,  ///< two or more writable in one lineage, confirmed by an overlapping re-probe
};

/// Stable snake_case name for metrics, JSON and logs.
const char* VerdictName(Verdict verdict);
/// The `check` command's exit code for a verdict (0 healthy, 3..7 otherwise).
int VerdictExitCode(Verdict verdict);
/// Every verdict, best first.
const std::vector<Verdict>& AllVerdicts();

/// What the detector remembers about one member across rounds. Not thread-safe.
struct MemberHistory {
  std::optional<Observation> last;               ///< the latest observation, ok or not
  std::optional<Claim> last_claim;               ///< the claim of the latest successful reading
  std::optional<PostgresReading> last_reading;   ///< PostgreSQL only: its latest reading
  std::optional<WallClock::time_point> last_ok;  ///< when it was last read
  std::optional<WallClock::time_point> writable_since;      ///< start of the writable streak
  std::optional<WallClock::time_point> last_seen_writable;  ///< latest writable reading
  int consecutive_failures = 0;
  /// The latest probe the server did not answer at all (timeout, unreachable): frozen or cut
  /// off. A closed connection or a refusal is an answer of sorts (Sentinel kills the clients
  /// of every server it reconfigures), so it does not count.
  std::optional<WallClock::time_point> last_unanswered;
  /// Patroni: the latest successful REST reading, and when the DCS last named it holder.
  std::optional<PatroniReading> last_patroni;
  std::optional<WallClock::time_point> last_seen_holding;
  /// True when the latest successful reading said writable.
  bool last_known_writable() const { return last_claim && last_claim->writable(); }
};

/// What the detector remembers of a lock's fencing tokens across rounds (issue 13): the
/// highest the lock store and the resource witness have shown, and each time one went back.
struct FencingMemory {
  std::int64_t store_revision_high = 0;  ///< the highest store revision read; 0 none yet
  std::int64_t resource_high = -1;       ///< the highest token the witness showed; -1 none
  /// Each regression seen, in words ("the resource accepted token 17 after 42"), and when the
  /// latest was seen. They stay for kFencingRegressionHold after it: the fence was broken.
  std::vector<std::string> regressions;
  std::optional<WallClock::time_point> last_regression;
  /// The witness's token of the latest read when the lock store never issued it (above every
  /// revision it showed); unset otherwise. Said once in the log when it appears or changes.
  std::optional<std::int64_t> unissued_resource_token;
};

/// Per-cluster memory: member histories and the lineage the cluster is judged by.
struct ClusterHistory {
  std::map<std::string, MemberHistory> members;
  std::string lineage;
  FencingMemory fencing;
};

/// The lock store's answer for one round of a Patroni cluster.
using LockRecordResult = std::variant<LockRecord, ProbeFailure>;

/// Lineage ids joined by claims that continued one from another (a Redis master's replid2
/// is the replid it was promoted from): masters linked so are one lineage. PostgreSQL claims
/// carry no previous lineage, so each id stands alone. Not thread-safe.
class LineageLinks {
 public:
  LineageLinks() = default;
  /// Links every successful claim of `round` to the lineage it continued from.
  explicit LineageLinks(const std::vector<Observation>& round);
  /// Joins `lineage` and `previous` (either may be empty: then nothing is joined).
  void Link(const std::string& lineage, const std::string& previous);
  /// True when the two ids are one lineage.
  bool Same(const std::string& a, const std::string& b) const;

 private:
  std::string Root(const std::string& id) const;
  std::map<std::string, std::string> parent_;
};

/// Folds one observation, read at `at`, into the member's history; `holder` is the lock
/// holder the DCS named in the same round (empty when unknown).
void RecordObservation(MemberHistory& history, const Observation& obs, WallClock::time_point at,
                       const std::string& holder = "");

/// The lineage a round is judged by: the configured one; else the one the lock store
/// recorded at bootstrap (Patroni's initialize key); else the system identifier that a strict
/// majority of members last reported; else the previous one; else the most common.
std::string ChooseLineage(const ClusterSpec& spec, const ClusterHistory& history,
                          const LockRecordResult* dcs = nullptr);

/// True when the member's manager (Patroni's REST API) says it belongs to another scope than
/// the cluster's; always false for a cluster without a scope or a member without a manager.
bool ClaimsOtherScope(const ClusterSpec& spec, const Observation& obs);

/// Members of `lineage` seen writable in `round`.
std::vector<std::string> WritableInLineage(const std::vector<Observation>& round,
                                           const std::string& lineage);

/// The span over which a member is known to have been writable: from an earlier writable
/// reading on the same session (same postmaster start, same backend) to the re-probe's
/// answer. A primary cannot go back into recovery without a restart, which ends the
/// session, so an unbroken session that read writable twice was not in recovery in
/// between. Without such an earlier reading, the re-probe's own window.
ReadingWindow WritableSpan(const Observation* earlier, const Observation& reprobe);

/// The confirmation rule: at least two members of `lineage` read writable in the re-probe,
/// and their writable spans (see WritableSpan; `earlier` is the round that raised the
/// candidate, may be null) overlap in time. Returns the members of the first overlapping
/// pair and any others overlapping with both; empty when not confirmed.
std::vector<std::string> ConfirmedWritable(const std::vector<Observation>& reprobe,
                                           const std::string& lineage,
                                           const std::vector<Observation>* earlier = nullptr);

/// A finding kept from paging, and why. Always exported and shown; never silent.
struct Suppression {
  std::string suppressor;      ///< provisioning | label_regrouping | transition
  std::string kind;            ///< the declaration's kind, "" when no declaration is involved
  std::string reason;          ///< the declaration's reason, or the evidence
  std::string declaration_id;  ///< "" when no declaration is involved
  std::string hidden;          ///< what it kept from firing: a verdict name or "lineage_forked"
  std::vector<std::string> members;
  WallClock::time_point expires{};  ///< it lapses then unless renewed by fresh evidence
};

/// The verdict and the evidence behind it.
struct Assessment {
  Verdict verdict = Verdict::kUnknown;
  /// The verdict before suppressors ran; differs from `verdict` only when one suppressed it.
  Verdict raw_verdict = Verdict::kUnknown;
  std::vector<Suppression> suppressions;
  /// A confirmed same-lineage split brain inside a declared scope: warns, never silent.
  bool suppressed_split_brain = false;
  std::string summary;                ///< one line for humans
  std::string lineage;                ///< the system identifier judged by
  std::vector<std::string> writable;  ///< writable members of the lineage
  std::vector<std::string> drift;     ///< writable members of another lineage
  /// Holders of the lineage whose own guard refuses writes (Redis min-replicas-to-write).
  std::vector<std::string> fenced;
  std::vector<std::string> suspects;    ///< last seen writable, unreadable now
  std::vector<std::string> unreadable;  ///< failed this round
  std::map<std::string, int> writable_per_lineage;

  // Clusters with a scope (other_scope) or a lock store (the rest) only.
  std::string scope;
  bool lock_readable = false;            ///< the lock store answered this round
  std::string lock_error;                ///< why it did not
  std::string lock_holder;               ///< the leader key's value ("" = no leader key)
  std::vector<std::string> zombies;      ///< writable members that do not hold the lock
  std::vector<std::string> other_scope;  ///< members whose manager claims another scope

  // Locks whose resource reports the highest token it accepted (a resource witness).
  std::optional<std::int64_t> resource_token;  ///< the witness's token this round
  /// The witness's token is above every revision the lock store showed: a token the store
  /// never issued is no evidence of a fence (shown, warned in `fencing_warning`, never fenced).
  bool resource_token_unissued = false;
  std::string fencing_warning;  ///< why the witness's token was not believed; empty when it was
  /// Zombies whose token is below the resource's: the resource rejects their writes.
  std::vector<std::string> fenced_zombies;
  /// A confirmed split brain whose every zombie is fenced: SplitBrainFenced warns, no page.
  bool split_brain_fenced = false;
  /// The fence itself broken (FencingTokenRegressed): a token or revision that went back.
  std::vector<std::string> fencing_regressions;
};

/// Pure: decides from the (post-confirmation) round, the history already updated with it,
/// whether a candidate of two or more writable members passed confirmation, and what the
/// lock store said in the same round (`dcs`: null exactly when the cluster has no store).
Assessment Assess(const ClusterSpec& spec, const std::vector<Observation>& round,
                  const ClusterHistory& history, bool confirmed,
                  const LockRecordResult* dcs = nullptr);

}  // namespace sbd
