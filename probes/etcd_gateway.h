// Reads through etcd's v3 JSON gateway on the event loop (issue 25), shared by the etcd lock
// stores (Patroni scopes, elections): the endpoints tried in turn, each with its share of the
// deadline, and the range-then-lease chain both stores run on one endpoint.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "probes/async_probe.h"
#include "probes/http_loop.h"

namespace sbd {

/// One read on one endpoint: calls `done` exactly once, on the loop thread, by `until`.
using EtcdEndpointRead =
    std::function<void(LoopHttpClient& client, const std::string& endpoint,
                       SteadyClock::time_point until, AsyncLockStore::Done done)>;

/// The endpoint loop of an etcd lock store on the event loop: tries the endpoints in turn,
/// starting with the last one that answered, each remaining endpoint given an equal share of
/// what is left of the deadline, so that a hung endpoint costs only its share. A failure names
/// the endpoint that gave it (the last one tried). Owns the store's LoopHttpClient (made on
/// the first Start()). Hold it in a shared_ptr: a request in flight keeps it alive. Loop
/// thread only (construction excepted); one read at a time.
class EtcdGatewayReader : public std::enable_shared_from_this<EtcdGatewayReader> {
 public:
  EtcdGatewayReader(EventLoop& loop, std::vector<std::string> endpoints, EtcdEndpointRead read);
  EtcdGatewayReader(const EtcdGatewayReader&) = delete;
  EtcdGatewayReader& operator=(const EtcdGatewayReader&) = delete;

  /// Starts one read; `done` runs once, with the first view an endpoint gives, else the last
  /// failure (or "no etcd endpoints").
  void Start(SteadyClock::time_point deadline, AsyncLockStore::Done done);
  /// The client, for a request after a read (idle once the read's `done` runs). Start() first.
  LoopHttpClient& client() { return *client_; }
  /// Drops the client and the read in flight, whose `done` then never runs.
  void Close();

 private:
  void TryNext();
  void Answered(size_t index, std::variant<LockRecord, ProbeFailure>&& read);

  EventLoop& loop_;
  std::vector<std::string> endpoints_;
  EtcdEndpointRead read_;
  size_t preferred_ = 0;
  std::unique_ptr<LoopHttpClient> client_;
  // The read in flight:
  AsyncLockStore::Done done_;
  SteadyClock::time_point deadline_{};
  size_t attempt_ = 0;
  ProbeFailure last_{ProbeFailureReason::kConfig, "no etcd endpoints"};
};

/// Turns a /v3/kv/range answer into a view (without the lease's time left).
using EtcdRangeParser =
    std::function<std::variant<LockRecord, ProbeFailure>(const nlohmann::json&)>;

/// On one endpoint: POST /v3/kv/range with `range`, parsed by `parse`; then, when the view has
/// a holder whose key carries a lease, POST /v3/lease/timetolive of that lease (ApplyEtcdLease:
/// a failed lease read leaves the time left unknown). `done` gets the view, with `endpoint`
/// set, or the range's failure. Loop thread only.
void StartEtcdRangeAndLease(LoopHttpClient& client, const std::string& endpoint,
                            const nlohmann::json& range, SteadyClock::time_point until,
                            EtcdRangeParser parse, AsyncLockStore::Done done);

}  // namespace sbd
