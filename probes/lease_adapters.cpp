#include "probes/lease_adapters.h"

#include "detector/common/logfmt.h"

namespace sbd {

namespace {

// The four claim fields every claims-only kind's spec has under the same names.
template <typename Spec>
ClaimQuery QueryOfSpec(const Spec& spec) {
  ClaimQuery query;
  query.metric = spec.claim_metric;
  query.lock_label = spec.lock_label;
  query.lock = spec.lock;
  query.token_label = spec.token_label;
  return query;
}

}  // namespace

ClaimQuery ClaimQueryOf(const RedisLeaseSpec& spec) { return QueryOfSpec(spec); }

ClaimQuery ClaimQueryOf(const K8sLeaseSpec& spec) { return QueryOfSpec(spec); }

ClaimQuery ClaimQueryOf(const EtcdElectionSpec& spec) { return QueryOfSpec(spec); }

ClaimQuery ClaimQueryOf(const ZooKeeperLockSpec& spec) { return QueryOfSpec(spec); }

namespace {

ClaimTarget TargetOf(const MemberSpec& member, const ClaimQuery& query) {
  ClaimTarget target;
  target.member = member.name;
  target.url = member.claim_url;
  target.query = query;
  return target;
}

}  // namespace

struct LeaseClaimProbe::Session : std::enable_shared_from_this<Session> {
  Session(EventLoop& event_loop, ClaimTarget claim_target, std::string lock_name,
          std::string member_identity)
      : loop(event_loop),
        target(std::move(claim_target)),
        request(ClaimRequest(target)),
        lock(std::move(lock_name)),
        identity(std::move(member_identity)) {}

  void Send(SteadyClock::time_point deadline, Done done);
  Observation Read(Observation obs, HttpResult result) const;

  EventLoop& loop;
  ClaimTarget target;
  HttpRequest request;
  std::string lock;
  std::string identity;
  std::unique_ptr<LoopHttpClient> client;  // made on the loop thread, closed there
};

void LeaseClaimProbe::Session::Send(SteadyClock::time_point deadline, Done done) {
  if (!client) client = std::make_unique<LoopHttpClient>(loop);
  Observation obs;
  obs.member = target.member;
  obs.window.sent_wall = WallClock::now();
  obs.window.sent = SteadyClock::now();
  // `self` rides in the client's callback until it answers or Close() drops the client.
  client->Start(request, deadline,
                [self = shared_from_this(), obs, done = std::move(done)](HttpResult result) {
                  done(self->Read(obs, std::move(result)));
                });
}

Observation LeaseClaimProbe::Session::Read(Observation obs, HttpResult result) const {
  obs.window.received = SteadyClock::now();
  if (auto* failure = std::get_if<ProbeFailure>(&result)) {
    obs.result = std::move(*failure);
    return obs;
  }
  auto text = ClaimText(std::move(std::get<HttpAnswer>(result)));
  if (auto* failure = std::get_if<ProbeFailure>(&text)) {
    obs.result = std::move(*failure);
    return obs;
  }
  auto claim = FindClaim(std::get<std::string>(text), target.query);
  if (auto* failure = std::get_if<ProbeFailure>(&claim)) {
    obs.result = std::move(*failure);
    return obs;
  }
  const ClaimReading& reading = std::get<ClaimReading>(claim);
  LockClaimReading out;
  out.lock = lock;
  out.claims = reading.state == ClaimReading::State::kClaims;
  out.competes = reading.state != ClaimReading::State::kAbsent;
  out.token = reading.token ? *reading.token : identity;
  obs.result = std::move(out);
  return obs;
}

LeaseClaimProbe::LeaseClaimProbe(const ClusterSpec& spec, const MemberSpec& member, EventLoop& loop)
    : LeaseClaimProbe(member, ClaimQueryOf(spec.redis_lease), loop) {}

LeaseClaimProbe::LeaseClaimProbe(const MemberSpec& member, const ClaimQuery& query, EventLoop& loop)
    : loop_(loop),
      session_(std::make_shared<Session>(loop, TargetOf(member, query), query.lock,
                                         member.lease_identity)) {}

LeaseClaimProbe::~LeaseClaimProbe() {
  // The client's handles belong to the loop: close them there (dropping what is in flight).
  loop_.Post([session = std::move(session_)] { session->client.reset(); });
}

void LeaseClaimProbe::Start(SteadyClock::time_point deadline, std::shared_ptr<LoopGate> gate,
                            Done done) {
  if (!gate) return session_->Send(deadline, std::move(done));
  gate->Arrive([session = session_, deadline, done = std::move(done)]() mutable {
    session->Send(deadline, std::move(done));
  });
}

namespace {

std::string Shown(const LeaseKeyReading& key) { return LogfmtEscape(key.key); }

// The key's finding for `rejected`, or "" when it is an ordinary held or gone key.
std::string KeyFinding(const LeaseKeyReading& key) {
  if (key.state == LeaseKeyReading::State::kWrongType) {
    return Shown(key) + ": a " + LogfmtEscape(key.type) + ", not a string: not a lease";
  }
  if (key.state == LeaseKeyReading::State::kHeld && key.token_truncated) {
    return Shown(key) + ": a token of " + std::to_string(key.token_length) +
           " bytes, too long to compare: its holder is unknown";
  }
  if (key.NoTtl()) return Shown(key) + ": no TTL (PTTL -1): the lease never expires";
  return "";
}

}  // namespace

LockRecord LeaseRecordAsView(const LeaseRecord& record, const std::vector<MemberSpec>& members) {
  LockRecord view;
  view.endpoint = record.endpoint;
  view.lease_id = "0";
  std::vector<const LeaseKeyReading*> held;
  for (const LeaseKeyReading& key : record.keys) {
    if (std::string finding = KeyFinding(key); !finding.empty()) {
      view.rejected.push_back(std::move(finding));
    }
    if (key.state == LeaseKeyReading::State::kHeld) held.push_back(&key);
  }
  if (!record.scan_limit_hit.empty()) {
    view.rejected.push_back("SCAN stopped at " + record.scan_limit_hit +
                            ": keys beyond it were not read");
  }
  if (held.size() > 1) {
    std::string keys;
    for (const auto* key : held) keys += (keys.empty() ? "" : ", ") + Shown(*key);
    view.rejected.push_back(std::to_string(held.size()) + " keys held at once (" + keys +
                            "): the holder is unknown");
    return view;
  }
  if (held.empty() || held[0]->token_truncated) return view;
  const LeaseKeyReading& key = *held[0];
  view.holder_token = key.token;
  if (key.lease_left_ms >= 0) view.lease_ttl_remaining = (key.lease_left_ms + 999) / 1000;
  for (const MemberSpec& member : members) {
    if (!member.lease_identity.empty() && member.lease_identity == key.token) {
      view.holder = member.name;
    }
  }
  return view;
}

RedisLeaseStore::RedisLeaseStore(const ClusterSpec& spec, EventLoop& loop)
    : spec_(spec.redis_lease), members_(spec.members), loop_(loop) {}

RedisLeaseStore::~RedisLeaseStore() {
  // The reader is the loop's: close it there, after anything in flight.
  loop_.Post([reader = std::move(reader_)] {
    if (reader) reader->Close();
  });
}

void RedisLeaseStore::Start(SteadyClock::time_point deadline, Done done) {
  if (reader_ && *reread_) {
    reader_->Close();
    reader_.reset();
  }
  *reread_ = false;
  if (!reader_) {
    MemberSpec login;
    login.password_file = spec_.password_file;
    login.password_env = spec_.password_env;
    auto password = ResolvePassword(login);
    if (const std::string* error = std::get_if<std::string>(&password)) {
      return done(ProbeFailure{ProbeFailureReason::kConfig, *error});
    }
    const HostPort at = SplitHostPort(spec_.address, "6379");
    RedisEndpoint endpoint;
    endpoint.host = at.host;
    endpoint.port = std::atoi(at.port.c_str());
    endpoint.user = spec_.username;
    endpoint.password = std::get<std::optional<std::string>>(password).value_or("");
    LeaseKeys keys;
    if (spec_.pattern.empty()) keys.names = {spec_.key};
    keys.pattern = spec_.pattern;
    keys.max_keys = static_cast<size_t>(spec_.max_keys);
    keys.max_iterations = static_cast<size_t>(spec_.max_scan_iterations);
    reader_ = std::make_shared<LoopLeaseReader>(loop_, std::move(endpoint), std::move(keys));
  }
  // The callback holds no pointer to the store, which may be gone by the time it runs.
  reader_->Start(deadline, [reread = reread_, members = members_, done = std::move(done)](
                               std::variant<LeaseRecord, ProbeFailure> record) {
    if (auto* failure = std::get_if<ProbeFailure>(&record)) {
      // A changed password file or variable is read again at the next connect.
      if (failure->reason == ProbeFailureReason::kAuth) *reread = true;
      return done(*failure);
    }
    done(LeaseRecordAsView(std::get<LeaseRecord>(record), members));
  });
}

}  // namespace sbd
