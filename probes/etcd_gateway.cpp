#include "probes/etcd_gateway.h"

#include "probes/etcd.h"
#include "probes/http_json.h"

namespace sbd {

EtcdGatewayReader::EtcdGatewayReader(EventLoop& loop, std::vector<std::string> endpoints,
                                     EtcdEndpointRead read)
    : loop_(loop), endpoints_(std::move(endpoints)), read_(std::move(read)) {}

void EtcdGatewayReader::Start(SteadyClock::time_point deadline, AsyncLockStore::Done done) {
  if (!client_) client_ = std::make_unique<LoopHttpClient>(loop_);
  done_ = std::move(done);
  deadline_ = deadline;
  attempt_ = 0;
  last_ = ProbeFailure{ProbeFailureReason::kConfig, "no etcd endpoints"};
  TryNext();
}

void EtcdGatewayReader::Close() {
  client_.reset();
  done_ = nullptr;
}

void EtcdGatewayReader::TryNext() {
  if (attempt_ >= endpoints_.size()) {
    AsyncLockStore::Done done = std::move(done_);
    done_ = nullptr;
    if (done) done(last_);
    return;
  }
  const size_t index = (preferred_ + attempt_) % endpoints_.size();
  const auto share =
      (deadline_ - SteadyClock::now()) / static_cast<int>(endpoints_.size() - attempt_);
  read_(*client_, endpoints_[index], SteadyClock::now() + share,
        [self = shared_from_this(), index](std::variant<LockRecord, ProbeFailure> read) {
          self->Answered(index, std::move(read));
        });
}

void EtcdGatewayReader::Answered(size_t index, std::variant<LockRecord, ProbeFailure>&& read) {
  if (!done_) return;  // closed meanwhile
  if (std::holds_alternative<LockRecord>(read)) {
    preferred_ = index;
    AsyncLockStore::Done done = std::move(done_);
    done_ = nullptr;
    return done(std::move(read));
  }
  last_ = std::get<ProbeFailure>(std::move(read));
  last_.message = UrlBase(endpoints_[index]) + ": " + last_.message;
  ++attempt_;
  TryNext();
}

void StartEtcdRangeAndLease(LoopHttpClient& client, const std::string& endpoint,
                            const nlohmann::json& range, SteadyClock::time_point until,
                            EtcdRangeParser parse, AsyncLockStore::Done done) {
  StartFetchJson(
      client, endpoint, "/v3/kv/range", range.dump(), until,
      [&client, endpoint, until, parse = std::move(parse), done = std::move(done)](auto answer) {
        if (auto* failure = std::get_if<ProbeFailure>(&answer)) return done(std::move(*failure));
        auto parsed = parse(std::get<nlohmann::json>(answer));
        if (auto* failure = std::get_if<ProbeFailure>(&parsed)) return done(std::move(*failure));
        LockRecord view = std::get<LockRecord>(std::move(parsed));
        view.endpoint = endpoint;
        const bool held = !view.holder.empty() || !view.holder_token.empty();
        if (!held || view.lease_id.empty() || view.lease_id == "0") return done(std::move(view));
        const nlohmann::json ask = {{"ID", view.lease_id}};
        StartFetchJson(client, endpoint, "/v3/lease/timetolive", ask.dump(), until,
                       [view = std::move(view), done](auto lease) mutable {
                         ApplyEtcdLease(lease, view);
                         done(std::move(view));
                       });
      });
}

}  // namespace sbd
