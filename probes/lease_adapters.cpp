#include "probes/lease_adapters.h"

#include "detector/common/logfmt.h"

namespace sbd {

std::string ShownToken(std::string_view token) {
  if (token.size() <= kShownTokenBytes) return LogfmtEscape(token);
  // Cut on a character boundary, so the escape does not turn a split character into bytes.
  size_t cut = 0;
  while (cut < kShownTokenBytes) {
    const size_t length = Utf8SequenceLength(token, cut);
    if (cut + std::max<size_t>(length, 1) > kShownTokenBytes) break;
    cut += std::max<size_t>(length, 1);
  }
  return LogfmtEscape(token.substr(0, cut)) + "...(" + std::to_string(token.size()) + " bytes)";
}

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

LeaseClaimProbe::LeaseClaimProbe(const ClusterSpec& spec, const MemberSpec& member)
    : LeaseClaimProbe(member, ClaimQueryOf(spec.redis_lease)) {}

LeaseClaimProbe::LeaseClaimProbe(const MemberSpec& member, const ClaimQuery& query)
    : claims_(TargetOf(member, query)), lock_(query.lock), identity_(member.lease_identity) {}

Observation LeaseClaimProbe::Probe(SteadyClock::time_point deadline, StartGate* gate) {
  ClaimObservation claim = claims_.Probe(deadline, gate);
  Observation obs;
  obs.member = std::move(claim.member);
  obs.window = claim.window;
  if (const ProbeFailure* failure = claim.failure()) {
    obs.result = *failure;
    return obs;
  }
  const ClaimReading& reading = *claim.reading();
  LockClaimReading out;
  out.lock = lock_;
  out.claims = reading.state == ClaimReading::State::kClaims;
  out.competes = reading.state != ClaimReading::State::kAbsent;
  out.token = reading.token ? *reading.token : identity_;
  obs.result = std::move(out);
  return obs;
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

DcsView LeaseRecordAsView(const LeaseRecord& record, const std::vector<MemberSpec>& members) {
  DcsView view;
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

RedisLeaseStore::RedisLeaseStore(const ClusterSpec& spec)
    : spec_(spec.redis_lease), members_(spec.members) {}

RedisLeaseStore::~RedisLeaseStore() = default;

std::variant<DcsView, ProbeFailure> RedisLeaseStore::Read(SteadyClock::time_point deadline) {
  if (!reader_) {
    MemberSpec login;
    login.password_file = spec_.password_file;
    login.password_env = spec_.password_env;
    auto password = ResolvePassword(login);
    if (const std::string* error = std::get_if<std::string>(&password)) {
      return ProbeFailure{ProbeFailureReason::kConfig, *error};
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
    reader_ = std::make_unique<RedisLeaseReader>(std::move(endpoint), std::move(keys));
  }
  auto record = reader_->Read(deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&record)) {
    // A changed password file or variable is read again at the next connect.
    if (failure->reason == ProbeFailureReason::kAuth) reader_.reset();
    return *failure;
  }
  return LeaseRecordAsView(std::get<LeaseRecord>(record), members_);
}

}  // namespace sbd
