#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "probes/http_loop.h"
#include "probes/probe.h"

namespace httplib {
class Client;
}

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

/// One claim probe of one candidate: the timing plus a reading or a failure.
struct ClaimObservation {
  std::string member;
  ReadingWindow window;  ///< [request sent, answer received]
  std::variant<ClaimReading, ProbeFailure> result;
  const ClaimReading* reading() const { return std::get_if<ClaimReading>(&result); }
  const ProbeFailure* failure() const { return std::get_if<ProbeFailure>(&result); }
  bool claims() const {
    return reading() != nullptr && reading()->state == ClaimReading::State::kClaims;
  }
};

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

/// Scrapes one candidate's metrics endpoint over HTTP (GET, Accept: text/plain 0.0.4) and finds
/// its claim. Connect, read and write are bounded by the deadline; the connection is kept
/// (keep-alive) so that a confirmation re-probe is normally ready before its gate. Follows the
/// start gate convention of probes/README.md. Never throws. Not thread-safe: one Probe() at a
/// time per instance.
class MetricsClaimProbe {
 public:
  explicit MetricsClaimProbe(ClaimTarget target);
  ~MetricsClaimProbe();
  MetricsClaimProbe(const MetricsClaimProbe&) = delete;
  MetricsClaimProbe& operator=(const MetricsClaimProbe&) = delete;

  /// Reads the claim once, giving up at `deadline` (kTimeout). With a `gate`, the request is
  /// sent only once every probe sharing it is ready; arrives at the gate exactly once.
  ClaimObservation Probe(SteadyClock::time_point deadline, StartGate* gate);

  /// The endpoint's whole answer (exposition text), giving up at `deadline`, for readers of
  /// other series than a claim (a lock's resource witness). No gate.
  std::variant<std::string, ProbeFailure> ReadText(SteadyClock::time_point deadline);

 private:
  std::variant<std::string, ProbeFailure> Fetch(SteadyClock::time_point deadline);

  ClaimTarget target_;
  std::string base_;  ///< scheme://host:port
  std::string path_;  ///< /metrics
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace sbd
