// Kubernetes Leases (coordination.k8s.io/v1) as a lock store: the Lease object read through
// the API server over HTTPS with a bearer token, parsed as untrusted JSON into a LockRecord.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/async_probe.h"
#include "probes/http_loop.h"
#include "probes/probe.h"

namespace sbd {

/// The largest Lease answer read; a bigger body is a protocol failure, never parsed.
constexpr size_t kMaxLeaseBodyBytes = 256 * 1024;
/// The longest holderIdentity compared; a longer one is said in `rejected`, its holder unknown.
constexpr size_t kMaxHolderIdentityBytes = 1024;

/// The fields of a Lease's spec the detector reads, each absent when the object lacks it or
/// holds it with a wrong type (then `rejected` says which and why). Plain value type.
struct K8sLeaseObject {
  std::string holder_identity;  ///< spec.holderIdentity; empty when none (the lease is free)
  std::optional<WallClock::time_point> renew_time;     ///< spec.renewTime
  std::optional<std::int64_t> lease_duration_seconds;  ///< spec.leaseDurationSeconds
  std::optional<std::int64_t> lease_transitions;       ///< spec.leaseTransitions: the epoch
  std::vector<std::string> rejected;  ///< fields read but unusable, each saying why (escaped)
};

/// An HTTP Date header (IMF-fixdate, "Tue, 01 Dec 2026 04:41:22 GMT"); nullopt for anything
/// else. Pure; thread-safe.
std::optional<WallClock::time_point> ParseHttpDate(std::string_view text);

/// Parses the API server's answer for Lease `name`: a JSON object of kind Lease (when it says)
/// whose metadata.name is `name` and with a spec object. Anything else is an error message
/// (no exception); a spec field of a wrong type or out of range is left unset and said in
/// `rejected`. Pure; thread-safe.
std::variant<K8sLeaseObject, std::string> ParseK8sLease(std::string_view body,
                                                        const std::string& name);

/// A Lease as the engine's LockRecord: `holder_token` the holderIdentity, `holder` the member whose
/// configured identity it is, `mod_revision` leaseTransitions (the epoch), `lease_granted_ttl`
/// leaseDurationSeconds and `lease_ttl_remaining` renewTime + leaseDurationSeconds - `now`,
/// rounded up (-1 when unknown or expired). Pure; thread-safe.
LockRecord K8sLeaseAsView(const K8sLeaseObject& lease, const std::vector<MemberSpec>& members,
                          WallClock::time_point now);

/// Where and how to reach the API server: from the config, or a kubeconfig's current context.
struct K8sApiAccess {
  std::string server;      ///< "https://host:port"
  std::string token;       ///< the bearer token: a secret, never shown
  std::string ca_file;     ///< a PEM file, or empty when `ca_pem` holds the CA
  std::string ca_pem;      ///< certificate-authority-data, decoded
  std::string token_file;  ///< a kubeconfig user's tokenFile, read by the caller
};

/// The current context's server, CA and token of a kubeconfig's text (YAML): clusters[].cluster
/// `server`, `certificate-authority` (relative to `dir`) or `certificate-authority-data`, and
/// users[].user `token` or `tokenFile`. An error message (naming no secret) otherwise.
/// Pure; thread-safe.
std::variant<K8sApiAccess, std::string> ParseKubeconfig(const std::string& text,
                                                        const std::string& dir);

/// The lock store of a k8s_lease cluster: GET /apis/coordination.k8s.io/v1/namespaces/<ns>/
/// leases/<name> over HTTPS, the server's certificate verified against the CA, the token (and
/// kubeconfig) read again at each read. The time left is computed against the answer's Date
/// header, the detector's clock only when it has none. The GET runs on the event loop
/// (LoopHttpClient), bounded as a whole. Never throws; the token is never in a message. The
/// object may be destroyed on any thread; Start() on the loop thread only, one at a time.
class K8sLeaseStore : public AsyncLockStore {
 public:
  explicit K8sLeaseStore(const ClusterSpec& spec, EventLoop& loop = EventLoop::Shared());
  ~K8sLeaseStore() override;
  K8sLeaseStore(const K8sLeaseStore&) = delete;
  K8sLeaseStore& operator=(const K8sLeaseStore&) = delete;

  void Start(SteadyClock::time_point deadline, Done done) override;
  EventLoop& loop() override { return loop_; }

 private:
  struct Session;
  EventLoop& loop_;
  std::shared_ptr<Session> session_;
};

/// Where a k8s_lease cluster's record is, for people: "Lease <ns>/<name> on <server>", saying
/// that the revision shown is leaseTransitions, the epoch. Pure; thread-safe.
std::string K8sLeaseRecord(const K8sLeaseSpec& spec);

}  // namespace sbd
