// etcd v3 elections and locks (issue 13) as a lock kind: the candidates' keys under one prefix,
// read through the v3 JSON gateway. The holder is the key with the lowest create revision, and
// that revision is the fencing token.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/async_probe.h"
#include "probes/metrics_claim.h"
#include "probes/probe.h"

namespace sbd {

/// The most candidates' keys one read takes; more are said in `rejected`.
constexpr int kMaxElectionKeys = 1000;
/// The most waiting candidates a view lists; the rest are counted.
constexpr size_t kMaxShownWaiting = 16;

/// The range of the recipe's keys for `prefix`: the prefix as the `concurrency` recipes use it
/// (with a trailing '/' added when missing). Pure; thread-safe.
std::string ElectionKeyPrefix(const std::string& prefix);

/// Parses a /v3/kv/range answer over the election's keys (sorted by create revision, or not:
/// it sorts them itself) into a view without the lease's time left: `holder_token` the lowest
/// create revision as decimal text, `mod_revision` that revision, `lease_id` the holder key's
/// lease, `holder` the member whose configured identity is the holder key's value (else
/// empty: the engine names the claimer carrying the token), `waiting` the others in order. A
/// key, revision or lease that is not etcd's own form fails the whole read (kProtocol). Pure;
/// thread-safe.
std::variant<LockRecord, ProbeFailure> ParseElectionRange(const nlohmann::json& body,
                                                          const std::string& key_prefix,
                                                          const std::vector<MemberSpec>& members);

/// The lock store of an etcd_election cluster: one range over the prefix sorted by create
/// revision, then the holder's lease (POST /v3/lease/timetolive). Endpoints are tried in turn,
/// starting with the last one that answered, each with its share of the deadline. Read only.
/// With a resource witness, its token is read too (`resource_token`; a failure is said in
/// `rejected`). Every request runs on the event loop (LoopHttpClient), bounded as a whole.
/// Never throws. The object may be destroyed on any thread; Start() on the loop thread only,
/// one at a time.
class EtcdElectionStore : public AsyncLockStore {
 public:
  explicit EtcdElectionStore(const ClusterSpec& spec, EventLoop& loop = EventLoop::Shared());
  ~EtcdElectionStore() override;
  EtcdElectionStore(const EtcdElectionStore&) = delete;
  EtcdElectionStore& operator=(const EtcdElectionStore&) = delete;

  void Start(SteadyClock::time_point deadline, Done done) override;
  EventLoop& loop() override { return loop_; }

 private:
  struct Session;
  EventLoop& loop_;
  std::shared_ptr<Session> session_;
};

}  // namespace sbd
