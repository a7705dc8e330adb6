// The hook fence of the opt-in remediation: the lease and election kinds' members are
// processes, which nothing outside can make refuse writes, so the detector asks the operator's
// hook to stop the zombie: one POST of the evidence as JSON, bounded as a whole.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <variant>

#include "detector/remediation/pg_fence.h"  // FenceOutcome
#include "probes/probe.h"                   // WallClock

namespace sbd {

/// Where a hook fence posts, and what. Plain value type.
struct HookFenceTarget {
  std::string url;                          ///< http:// or https://, no credentials in it
  std::optional<std::string> token;         ///< "Authorization: Bearer"; resolved, never logged
  std::string ca_file;                      ///< https: the CA to verify with; empty: the system's
  std::string body;                         ///< the evidence (HookEvidence)
  std::chrono::milliseconds timeout{3000};  ///< bounds the whole call (connect, TLS, answer)
};

/// Posts `target.body` to the hook. Blocking (call it off the event loop), on an event loop of
/// its own; never throws. A 2xx answer within the timeout is "fenced", unverified: the detector
/// cannot see a process stop, only its claim end in the next rounds (an incident stays open
/// while the fenced member still claims). Any other status, a failure to connect, TLS, a
/// redirect, an answer over 64 KiB or past the timeout is "failed", nothing claimed. The
/// answer may say how to undo what the hook did: a JSON object's "undo" string (at most 200
/// printable bytes) becomes the outcome's undo. The detail names the URL without its query.
FenceOutcome FenceByHook(const HookFenceTarget& target);

/// What the hook is sent. Plain value type.
struct HookEvidence {
  std::string cluster;
  std::string kind;
  std::string zombie;          ///< the member to stop
  std::string zombie_token;    ///< its claim's token; empty when it has none
  std::string zombie_address;  ///< where it exports its claim (claim_url)
  std::string holder;          ///< the member the lock store names
  std::string holder_token;
  WallClock::time_point incident_opened{};
  WallClock::time_point requested{};
};

/// The JSON the hook receives: {"version":1,"action":"stop","cluster",...}; docs/remediation.md
/// gives its fields.
std::string HookEvidenceJson(const HookEvidence& evidence);

/// The token a hook spec names (token_file: its first line; token_env), nullopt without one, or
/// why it cannot be read (the file or variable named, never the value).
std::variant<std::optional<std::string>, std::string> ResolveHookToken(
    const std::optional<std::string>& token_file, const std::optional<std::string>& token_env);

}  // namespace sbd
