#pragma once

// Witnesses: who a PostgreSQL standby's WAL receiver says its primary is. A judgement across
// the members of a round (which writable member each standby streams from), so it lives with
// the verdicts; the readings it reads are the kind-neutral ones of probes/probe.h.

#include <string>
#include <vector>

#include "detector/config/config.h"
#include "probes/probe.h"

namespace sbd {

/// "host:port" of the server a standby streams from, an IPv6 host in brackets, the way member
/// addresses are written; empty when the receiver hides it or names no host. Pure.
std::string SenderAddress(const WalReceiverReading& upstream);

/// The member a standby streams from: the first of `members` whose address (or one of its
/// comma-separated entries) is exactly SenderAddress(upstream). No name resolution: a member
/// configured as localhost:5432 is not 127.0.0.1:5432. Empty when none matches. Pure.
std::string SenderMember(const WalReceiverReading& upstream,
                         const std::vector<MemberSpec>& members);

/// One writable member and the members whose WAL receiver is streaming from it.
struct Witness {
  std::string primary;
  std::vector<std::string> streamers;
};

/// For each of `writable`, in order, the members of `round` read streaming from it (status
/// "streaming", sender matched by SenderMember). A member read failing, a hidden receiver or
/// one not streaming witnesses nothing. Pure.
std::vector<Witness> Witnesses(const std::vector<MemberSpec>& members,
                               const std::vector<Observation>& round,
                               const std::vector<std::string>& writable);

/// "pg-b, pg-c stream from pg-a; nobody streams from pg-d", with `alone` (e.g. ": it is on
/// its own") after each member nobody streams from. Pure.
std::string WitnessText(const std::vector<Witness>& witnesses, const std::string& alone = "");

}  // namespace sbd
