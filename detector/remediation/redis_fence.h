#pragma once
#include <chrono>
#include <optional>
#include <string>

#include "detector/config/config.h"         // RedisTlsSpec
#include "detector/remediation/pg_fence.h"  // FenceOutcome (result, detail, sessions_ended, verified)
namespace sbd {
/// Where and as whom a Redis fence connects. Plain value type.
struct RedisFenceTarget {
  std::string address;                      ///< "host:port" of the zombie
  std::string username;                     ///< ACL user for AUTH; empty: the default user
  std::optional<std::string> password;      ///< resolved; never logged
  std::optional<RedisTlsSpec> tls;          ///< as the cluster's members are reached
  std::chrono::milliseconds timeout{3000};  ///< bounds connect and each command
};
/// Fences one Redis master with its own write guard. Blocking (call off the event loop);
/// never throws. ROLE not master -> "not_primary", nothing changed. Otherwise records
/// min-replicas-to-write and min-replicas-max-lag, sets them, and checks with a write that
/// must be refused with NOREPLICAS: SET splitbrain-detector:fence-check <unix time> PX 1000.
/// "fenced" only when it was; the detail carries the undo with the recorded values.
FenceOutcome FenceRedis(const RedisFenceTarget& target);
/// The undo for recorded values, e.g. "CONFIG SET min-replicas-to-write 0 min-replicas-max-lag 10".
std::string RedisFenceUndo(const std::string& to_write, const std::string& max_lag);
}  // namespace sbd
