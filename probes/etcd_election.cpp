#include "probes/etcd_election.h"

#include <algorithm>

#include "detector/common/logfmt.h"
#include "probes/etcd.h"
#include "probes/exposition.h"
#include "probes/http_json.h"
#include "probes/json_fields.h"

namespace sbd {
namespace {

ProbeFailure Malformed(const std::string& what) {
  return ProbeFailure{ProbeFailureReason::kProtocol, what};
}

// One candidate's key as etcd wrote it.
struct CandidateKey {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::string lease;
};

std::variant<CandidateKey, ProbeFailure> ReadCandidate(const nlohmann::json& kv,
                                                       const std::string& where) {
  std::string key_text, value_text;
  std::int64_t lease = 0;
  CandidateKey candidate;
  JsonFields fields(kv, where);
  fields.String("key", &key_text)
      .String("value", &value_text)
      .DecimalInt64("create_revision", &candidate.create_revision, 0, kMaxStoreRevision)
      .DecimalInt64("lease", &lease);
  if (fields.error()) return Malformed(*fields.error());
  auto key = Base64Decode(key_text);
  auto value = Base64Decode(value_text);
  if (!key || !value) return Malformed(where + ": a key or value is not base64");
  if (candidate.create_revision <= 0) return Malformed(where + ": no create_revision");
  candidate.key = std::move(*key);
  candidate.value = std::move(*value);
  candidate.lease = std::to_string(lease);
  return candidate;
}

std::string Waiting(const CandidateKey& candidate) {
  return LogfmtEscape(candidate.key) + " (revision " + std::to_string(candidate.create_revision) +
         ")";
}

// The first key fills the holder's fields, the others queue behind it.
DcsView ViewOf(const std::vector<CandidateKey>& keys, const std::vector<MemberSpec>& members) {
  DcsView view;
  view.lease_id = "0";
  if (keys.empty()) return view;
  const CandidateKey& holder = keys.front();
  view.holder_token = std::to_string(holder.create_revision);
  view.mod_revision = holder.create_revision;
  view.lease_id = holder.lease;
  if (holder.lease == "0") {
    view.rejected.push_back(LogfmtEscape(holder.key) +
                            ": no lease: the holder's key never expires");
  }
  for (const MemberSpec& member : members) {
    if (!member.lease_identity.empty() && member.lease_identity == holder.value) {
      view.holder = member.name;
    }
  }
  for (size_t i = 1; i < keys.size() && i <= kMaxShownWaiting; ++i) {
    view.waiting.push_back(Waiting(keys[i]));
  }
  if (keys.size() > kMaxShownWaiting + 1) {
    view.waiting.push_back("and " + std::to_string(keys.size() - kMaxShownWaiting - 1) + " more");
  }
  return view;
}

}  // namespace

std::string ElectionKeyPrefix(const std::string& prefix) {
  if (!prefix.empty() && prefix.back() == '/') return prefix;
  return prefix + "/";
}

std::variant<DcsView, ProbeFailure> ParseElectionRange(const nlohmann::json& body,
                                                       const std::string& key_prefix,
                                                       const std::vector<MemberSpec>& members) {
  const nlohmann::json* kvs = nullptr;
  const nlohmann::json* header = nullptr;
  bool more = false;
  JsonFields fields(body, "range");
  fields.Array("kvs", &kvs).Bool("more", &more).Object("header", &header);
  if (fields.error()) return Malformed(*fields.error());
  std::int64_t store_revision = 0;
  if (header != nullptr) {
    JsonFields header_fields(*header, "range: header");
    header_fields.DecimalInt64("revision", &store_revision, 0, kMaxStoreRevision);
    if (header_fields.error()) return Malformed(*header_fields.error());
  }
  std::vector<CandidateKey> keys;
  for (size_t i = 0; kvs != nullptr && i < kvs->size(); ++i) {
    auto candidate = ReadCandidate((*kvs)[i], "range: kvs[" + std::to_string(i) + "]");
    if (auto* failure = std::get_if<ProbeFailure>(&candidate)) return *failure;
    auto& key = std::get<CandidateKey>(candidate);
    if (key.key.rfind(key_prefix, 0) == 0) keys.push_back(std::move(key));
  }
  std::stable_sort(keys.begin(), keys.end(), [](const CandidateKey& a, const CandidateKey& b) {
    return a.create_revision < b.create_revision;
  });
  DcsView view = ViewOf(keys, members);
  view.store_revision = store_revision;
  if (more) {
    view.rejected.push_back("more than " + std::to_string(kMaxElectionKeys) +
                            " candidates' keys: those beyond were not read");
  }
  return view;
}

std::variant<std::int64_t, std::string> WitnessToken(const std::string& text,
                                                     const ResourceWitnessSpec& witness) {
  auto parsed = ParseExposition(text, witness.metric);
  if (auto* error = std::get_if<std::string>(&parsed)) return *error;
  const auto& samples = std::get<std::vector<ExpositionSample>>(parsed);
  std::vector<const ExpositionSample*> of_lock, unlabelled;
  for (const ExpositionSample& sample : samples) {
    const std::string* lock = sample.Label(witness.lock_label);
    if (lock == nullptr) unlabelled.push_back(&sample);
    if (lock != nullptr && *lock == witness.lock) of_lock.push_back(&sample);
  }
  const auto& chosen = of_lock.empty() ? unlabelled : of_lock;
  if (chosen.empty())
    return "no " + witness.metric + " sample for lock " + LogfmtEscape(witness.lock);
  if (chosen.size() > 1) return "several " + witness.metric + " samples for one lock";
  const double value = chosen.front()->value;
  // Tokens are whole numbers; a double holds them exactly up to 2^53.
  if (!(value >= 0 && value <= 9007199254740992.0) ||
      value != static_cast<double>(static_cast<std::int64_t>(value))) {
    return witness.metric + " is not a whole number from 0 to 2^53";
  }
  return static_cast<std::int64_t>(value);
}

/// One read in flight at a time, each step started by the answer of the one before: the
/// range on an endpoint, the holder's lease there, then the witness. Loop thread only.
struct EtcdElectionStore::Session : std::enable_shared_from_this<Session> {
  Session(EventLoop& event_loop, const ClusterSpec& spec)
      : loop(event_loop),
        endpoints(spec.etcd_election.endpoints),
        prefix(ElectionKeyPrefix(spec.etcd_election.prefix)),
        members(spec.members),
        witness_spec(spec.etcd_election.resource_witness) {
    if (witness_spec) {
      witness_target.member = "resource witness";
      witness_target.url = witness_spec->url;
    }
  }

  void Start(SteadyClock::time_point until, Done on_done);
  void TryNext();
  void OnRange(size_t index, SteadyClock::time_point until,
               std::variant<nlohmann::json, ProbeFailure> answer);
  void Failed(size_t index, ProbeFailure failure);
  void Succeeded(size_t index, DcsView view);
  void Finish(std::variant<DcsView, ProbeFailure> read);

  EventLoop& loop;
  std::vector<std::string> endpoints;
  std::string prefix;
  std::vector<MemberSpec> members;
  std::optional<ResourceWitnessSpec> witness_spec;
  ClaimTarget witness_target;
  size_t preferred = 0;
  std::unique_ptr<LoopHttpClient> client;  // made and closed on the loop thread
  // The read in flight:
  Done done;
  SteadyClock::time_point deadline{};
  size_t attempt = 0;
  ProbeFailure last{ProbeFailureReason::kConfig, "no etcd endpoints"};
};

void EtcdElectionStore::Session::Start(SteadyClock::time_point until, Done on_done) {
  if (!client) client = std::make_unique<LoopHttpClient>(loop);
  done = std::move(on_done);
  deadline = until;
  attempt = 0;
  last = ProbeFailure{ProbeFailureReason::kConfig, "no etcd endpoints"};
  TryNext();
}

void EtcdElectionStore::Session::TryNext() {
  if (attempt >= endpoints.size()) return Finish(last);
  const size_t index = (preferred + attempt) % endpoints.size();
  const auto share = (deadline - SteadyClock::now()) / static_cast<int>(endpoints.size() - attempt);
  const auto until = SteadyClock::now() + share;
  std::string range_end = prefix;
  range_end.back() = static_cast<char>(range_end.back() + 1);
  // Sorted by etcd, so that a capped read still holds the lowest revisions, the holder first.
  const nlohmann::json range = {{"key", Base64Encode(prefix)},
                                {"range_end", Base64Encode(range_end)},
                                {"sort_order", "ASCEND"},
                                {"sort_target", "CREATE"},
                                {"limit", kMaxElectionKeys}};
  StartFetchJson(*client, endpoints[index], "/v3/kv/range", range.dump(), until,
                 [self = shared_from_this(), index, until](auto answer) {
                   self->OnRange(index, until, std::move(answer));
                 });
}

void EtcdElectionStore::Session::OnRange(size_t index, SteadyClock::time_point until,
                                         std::variant<nlohmann::json, ProbeFailure> answer) {
  if (auto* failure = std::get_if<ProbeFailure>(&answer)) return Failed(index, *failure);
  auto parsed = ParseElectionRange(std::get<nlohmann::json>(answer), prefix, members);
  if (auto* failure = std::get_if<ProbeFailure>(&parsed)) return Failed(index, *failure);
  DcsView view = std::get<DcsView>(std::move(parsed));
  view.endpoint = endpoints[index];
  if (view.holder_token.empty() || view.lease_id == "0") return Succeeded(index, std::move(view));
  const nlohmann::json ask = {{"ID", view.lease_id}};
  StartFetchJson(*client, endpoints[index], "/v3/lease/timetolive", ask.dump(), until,
                 [self = shared_from_this(), index, view = std::move(view)](auto lease) mutable {
                   ApplyEtcdLease(lease, view);
                   self->Succeeded(index, std::move(view));
                 });
}

void EtcdElectionStore::Session::Failed(size_t index, ProbeFailure failure) {
  failure.message = UrlBase(endpoints[index]) + ": " + failure.message;
  last = std::move(failure);
  ++attempt;
  TryNext();
}

void EtcdElectionStore::Session::Succeeded(size_t index, DcsView view) {
  preferred = index;
  if (!witness_spec) return Finish(std::move(view));
  client->Start(ClaimRequest(witness_target), deadline,
                [self = shared_from_this(), view = std::move(view)](HttpResult result) mutable {
                  std::variant<std::string, ProbeFailure> text =
                      ProbeFailure{ProbeFailureReason::kInternal, ""};
                  if (auto* failure = std::get_if<ProbeFailure>(&result)) {
                    text = std::move(*failure);
                  } else {
                    text = ClaimText(std::move(std::get<HttpAnswer>(result)));
                  }
                  if (auto* failure = std::get_if<ProbeFailure>(&text)) {
                    view.rejected.push_back("resource witness: " + failure->message);
                    return self->Finish(std::move(view));
                  }
                  auto token = WitnessToken(std::get<std::string>(text), *self->witness_spec);
                  if (auto* error = std::get_if<std::string>(&token)) {
                    view.rejected.push_back("resource witness: " + *error);
                  } else {
                    view.resource_token = std::get<std::int64_t>(token);
                  }
                  self->Finish(std::move(view));
                });
}

void EtcdElectionStore::Session::Finish(std::variant<DcsView, ProbeFailure> read) {
  Done on_done = std::move(done);
  done = nullptr;
  if (on_done) on_done(std::move(read));
}

EtcdElectionStore::EtcdElectionStore(const ClusterSpec& spec, EventLoop& loop)
    : loop_(loop), session_(std::make_shared<Session>(loop, spec)) {}

EtcdElectionStore::~EtcdElectionStore() {
  // The client's handles belong to the loop: close them there (dropping what is in flight).
  loop_.Post([session = std::move(session_)] { session->client.reset(); });
}

void EtcdElectionStore::Start(SteadyClock::time_point deadline, Done done) {
  session_->Start(deadline, std::move(done));
}

}  // namespace sbd
