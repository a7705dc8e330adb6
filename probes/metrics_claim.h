#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "probes/http_loop.h"
#include "probes/probe.h"

namespace sbd {

/// Which series carries a candidate's claim: `metric{<lock_label>="<lock>"}`, value 1 for
/// "I hold it", 0 for "I do not"; `token_label`, when set, names the label with its token.
struct ClaimQuery {
  std::string metric = "leader_election_master_status";  ///< client-go's
  std::string lock_label = "name";
  std::string lock;
  std::string token_label;  ///< empty: the claim carries no token
};

/// What a candidate says about one lock.
struct ClaimReading {
  enum class State {
    kClaims,        ///< a series of the lock says 1
    kDoesNotClaim,  ///< the lock's series say 0
    kAbsent,        ///< no series names the lock (the process does not compete for it)
  };
  State state = State::kAbsent;
  /// The token label's value on the claiming series (or on a 0 series); none when the query
  /// has no token label or the series lacks it. Raw bytes; LogfmtEscape it to show it.
  std::optional<std::string> token;
};

/// Finds the claim in a Prometheus text exposition. Malformed (a kProtocol failure naming the
/// line): any line ParseExposition rejects, a value of the lock other than 0 or 1 (NaN, Inf,
/// 0.5), and two series claiming it with different tokens. Pure; thread-safe.
std::variant<ClaimReading, ProbeFailure> FindClaim(std::string_view exposition,
                                                   const ClaimQuery& query);

/// Where a candidate publishes its claim.
struct ClaimTarget {
  std::string member;  ///< the candidate's name, copied to each observation
  std::string url;     ///< "http://host:port/metrics" (https too); the path defaults to /metrics
  ClaimQuery query;
  size_t max_body_bytes = 4 << 20;  ///< a larger answer is a kProtocol failure
};

/// The request that reads `target`'s claim on the event loop: GET `url` (path /metrics when it
/// has none), Accept: text/plain 0.0.4, the body capped at `max_body_bytes`. Pure.
HttpRequest ClaimRequest(const ClaimTarget& target);

/// An answer to ClaimRequest as its exposition text: 401 and 403 are kAuth failures, any other
/// status than 200 a kProtocol failure. Pure.
std::variant<std::string, ProbeFailure> ClaimText(HttpAnswer answer);

}  // namespace sbd
