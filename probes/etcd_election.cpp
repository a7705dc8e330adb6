#include "probes/etcd_election.h"

#include <algorithm>

#include "detector/common/logfmt.h"
#include "probes/etcd.h"
#include "probes/etcd_gateway.h"
#include "probes/exposition.h"
#include "probes/http_json.h"
#include "probes/json_fields.h"
#include "probes/resource_witness.h"

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
LockRecord ViewOf(const std::vector<CandidateKey>& keys, const std::vector<MemberSpec>& members) {
  LockRecord view;
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

std::variant<LockRecord, ProbeFailure> ParseElectionRange(const nlohmann::json& body,
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
  LockRecord view = ViewOf(keys, members);
  view.store_revision = store_revision;
  if (more) {
    view.rejected.push_back("more than " + std::to_string(kMaxElectionKeys) +
                            " candidates' keys: those beyond were not read");
  }
  return view;
}

namespace {

// The range over the election's keys, sorted by etcd, so that a capped read still holds the
// lowest revisions, the holder first.
nlohmann::json ElectionRange(const std::string& prefix) {
  std::string range_end = prefix;
  range_end.back() = static_cast<char>(range_end.back() + 1);
  return {{"key", Base64Encode(prefix)},
          {"range_end", Base64Encode(range_end)},
          {"sort_order", "ASCEND"},
          {"sort_target", "CREATE"},
          {"limit", kMaxElectionKeys}};
}

}  // namespace

/// The range and the holder's lease on an endpoint (EtcdGatewayReader), then the witness.
/// Loop thread only.
struct EtcdElectionStore::Session {
  Session(EventLoop& loop, const ClusterSpec& spec)
      : witness_spec(spec.etcd_election.resource_witness) {
    const std::string prefix = ElectionKeyPrefix(spec.etcd_election.prefix);
    auto read = [prefix, members = spec.members](LoopHttpClient& client,
                                                 const std::string& endpoint,
                                                 SteadyClock::time_point until, Done done) {
      auto parse = [prefix, members](const nlohmann::json& body) {
        return ParseElectionRange(body, prefix, members);
      };
      StartEtcdRangeAndLease(client, endpoint, ElectionRange(prefix), until, parse,
                             std::move(done));
    };
    reader = std::make_shared<EtcdGatewayReader>(loop, spec.etcd_election.endpoints, read);
  }

  std::optional<ResourceWitnessSpec> witness_spec;
  std::shared_ptr<EtcdGatewayReader> reader;
};

EtcdElectionStore::EtcdElectionStore(const ClusterSpec& spec, EventLoop& loop)
    : loop_(loop), session_(std::make_shared<Session>(loop, spec)) {}

EtcdElectionStore::~EtcdElectionStore() {
  // The client's handles belong to the loop: close them there (dropping what is in flight).
  loop_.Post([session = std::move(session_)] { session->reader->Close(); });
}

void EtcdElectionStore::Start(SteadyClock::time_point deadline, Done done) {
  if (!session_->witness_spec) return session_->reader->Start(deadline, std::move(done));
  std::weak_ptr<Session> weak = session_;
  session_->reader->Start(deadline, [weak, deadline, done = std::move(done)](auto read) {
    auto session = weak.lock();
    auto* view = std::get_if<LockRecord>(&read);
    if (!session || view == nullptr) return done(std::move(read));
    ReadResourceWitness(session->reader->client(), *session->witness_spec, deadline,
                        std::move(*view),
                        [session, done](LockRecord view) { done(std::move(view)); });
  });
}

}  // namespace sbd
