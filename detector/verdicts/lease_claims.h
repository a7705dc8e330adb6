#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "probes/metrics_claim.h"
#include "probes/redis_lease.h"

namespace sbd {

/// A lease's record as the zombie rule needs it: is it known, and whose token does it hold.
struct LeaseRecordView {
  bool known = false;                ///< false: unreadable, another type, or a token cut short
  std::optional<std::string> token;  ///< the key's value; none when the key is gone
  std::int64_t lease_left_ms = -2;   ///< PTTL: -1 no TTL, -2 gone
};

/// The view of one key's reading: known when held with its whole token, or gone.
LeaseRecordView RecordViewOf(const LeaseKeyReading& key);

/// One candidate's claim, and what the record would hold for it when its claim has no token.
struct CandidateClaim {
  ClaimObservation observation;  ///< its member names the candidate
  /// The value the candidate writes into the key (its configured identity), used when the
  /// claim carries no token label. Empty: none configured.
  std::string identity;
};

/// A claimer the record does not name.
struct LeaseZombie {
  std::string member;
  std::string claimed_token;  ///< its token (or identity); raw bytes
  std::string record_token;   ///< the key's value; empty when the key is gone
  bool record_gone = false;
};

/// What the claims and the record say together. Holds no verdict of severity: two concurrent
/// claimers is the split brain, a zombie alone is a claimer the record has moved past.
struct LeaseAssessment {
  std::vector<std::string> claimers;  ///< every candidate whose claim says 1
  /// The most claimers whose windows all share an instant: they claimed at once. Two or more
  /// is a split brain (after a confirming re-probe).
  std::vector<std::string> concurrent;
  bool split_brain() const { return concurrent.size() >= 2; }
  bool record_known = false;
  std::optional<std::string> named_holder;  ///< the claimer whose token the key holds
  std::vector<LeaseZombie> zombies;         ///< claimers the record does not name
  /// Claimers with neither a token nor a configured identity: the record cannot name them.
  std::vector<std::string> unidentified;
};

/// The zombie rule. A claimer's token is its claim's token label, else its identity. With a
/// known record, the claimer holding the key's token is the named holder; every other claimer
/// with a token is a zombie (also when the key is gone). An unknown record names nobody, and
/// so no zombie. Pure; thread-safe.
LeaseAssessment AssessLeaseClaims(const LeaseRecordView& record,
                                  const std::vector<CandidateClaim>& claims);

/// For a record that keeps a token (`holder_token`) and names no member: names as holder the
/// one member of `round` whose claim carries that token, preferring one that claims the lock;
/// nobody when none or several do. Leaves failures and named holders alone. Thread-safe.
void NameHolderByToken(std::variant<LockRecord, ProbeFailure>& record,
                       const std::vector<Observation>& round);

}  // namespace sbd
