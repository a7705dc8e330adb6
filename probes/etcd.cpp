#include "probes/etcd.h"

#include "detector/common/base64.h"
#include "detector/common/network_text.h"
#include "probes/etcd_watch.h"
#include "probes/json_fields.h"

namespace sbd {
namespace {

ProbeFailure Malformed(const std::string& what) {
  return ProbeFailure{ProbeFailureReason::kProtocol, what};
}

// The end of a prefix range: the prefix with its last byte incremented.
std::string RangeEnd(std::string prefix) {
  prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

// A key name as it may appear in a message (and so in a log line): at most 64 bytes, with
// control and non-ASCII bytes as \xNN, since anyone who can write to the DCS chooses it.
std::string Printable(const std::string& name) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < name.size() && i < 64; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    }
  }
  if (name.size() > 64) out += "...";
  return out;
}

// A member's registration is written by whoever can write to the DCS: a bad one skips that
// member, with the reason kept in view->rejected, and never blinds the rest of the view.
void ReadMember(const std::string& name, const std::string& value, LockRecord* view) {
  const std::string where = "members/" + Printable(name);
  if (name.empty()) {
    view->rejected.push_back(where + ": no member name");
    return;
  }
  auto parsed = ParseUntrustedJson(value);
  if (auto* problem = std::get_if<std::string>(&parsed)) {
    view->rejected.push_back(where + ": " + *problem);
    return;
  }
  const nlohmann::json& data = std::get<nlohmann::json>(parsed);
  DcsMember member;
  member.name = NetworkName(name);
  JsonFields fields(data, where);
  fields.String("conn_url", &member.conn_url)
      .String("api_url", &member.api_url)
      .String("role", &member.role)
      .String("state", &member.state);
  if (fields.error()) {
    view->rejected.push_back(*fields.error());
    return;
  }
  view->members.push_back(std::move(member));
}

// The scope's dynamic configuration: only its ttl is read, and a bad one leaves it unknown.
void ReadConfig(const std::string& value, LockRecord* view) {
  auto parsed = ParseUntrustedJson(value);
  if (auto* problem = std::get_if<std::string>(&parsed)) {
    view->rejected.push_back("config: " + *problem);
    return;
  }
  std::int64_t ttl = -1;
  JsonFields fields(std::get<nlohmann::json>(parsed), "config");
  // The ttl becomes milliseconds and a deadline: a huge one would wrap negative.
  fields.DecimalInt64("ttl", &ttl, 1, kMaxLeaseSeconds);
  if (fields.error()) {
    view->rejected.push_back(*fields.error());
  } else if (ttl > 0) {
    view->config_ttl = ttl;
  }
}

// One key of the range. The key, value, revision and lease are written by etcd itself, so a
// malformed one means the answer is not etcd's: the whole read fails.
std::optional<ProbeFailure> ReadKey(const nlohmann::json& kv, const std::string& where,
                                    const std::string& prefix, LockRecord* view) {
  std::string key_text, value_text;
  std::int64_t mod_revision = 0, lease = 0;
  JsonFields fields(kv, where);
  fields.String("key", &key_text)
      .String("value", &value_text)
      .DecimalInt64("mod_revision", &mod_revision, 0, kMaxStoreRevision)
      .DecimalInt64("lease", &lease);
  if (fields.error()) return Malformed(*fields.error());
  auto key = Base64Decode(key_text);
  auto value = Base64Decode(value_text);
  if (!key || !value) return Malformed(where + ": a key or value is not base64");
  if (key->rfind(prefix, 0) != 0) return std::nullopt;
  const std::string name = key->substr(prefix.size());
  if (name == "leader") {
    view->holder = NetworkName(*value);
    view->mod_revision = mod_revision;
    view->lease_id = std::to_string(lease);
  } else if (name == "initialize") {
    view->initialize = *value;
  } else if (name == "config") {
    ReadConfig(*value, view);
  } else if (name.rfind("members/", 0) == 0) {
    ReadMember(name.substr(8), *value, view);
  }
  return std::nullopt;
}

}  // namespace

EtcdScopeProbe::EtcdScopeProbe(std::vector<std::string> endpoints, std::string dcs_namespace,
                               std::string scope, EventLoop& loop)
    : loop_(loop), endpoints_(std::move(endpoints)), prefix_(dcs_namespace + "/" + scope + "/") {
  auto read = [prefix = prefix_](LoopHttpClient& client, const std::string& endpoint,
                                 SteadyClock::time_point until, Done done) {
    const nlohmann::json range = {{"key", Base64Encode(prefix)},
                                  {"range_end", Base64Encode(RangeEnd(prefix))}};
    auto parse = [prefix](const nlohmann::json& body) { return ParseRange(body, prefix); };
    StartEtcdRangeAndLease(client, endpoint, range, until, parse, std::move(done));
  };
  reader_ = std::make_shared<EtcdGatewayReader>(loop, endpoints_, read);
}

EtcdScopeProbe::~EtcdScopeProbe() {
  // The client's handles belong to the loop: close them there (dropping what is in flight).
  loop_.Post([reader = std::move(reader_)] { reader->Close(); });
}

void EtcdScopeProbe::Start(SteadyClock::time_point deadline, Done done) {
  reader_->Start(deadline, std::move(done));
}

std::variant<LockRecord, ProbeFailure> EtcdScopeProbe::ParseRange(const nlohmann::json& body,
                                                                  const std::string& prefix) {
  LockRecord view;
  const nlohmann::json* kvs = nullptr;
  const nlohmann::json* header = nullptr;
  JsonFields fields(body, "range");
  fields.Array("kvs", &kvs).Object("header", &header);
  if (fields.error()) return Malformed(*fields.error());
  if (header != nullptr) {
    // The store's revision: lower than before means etcd was restored from a backup.
    JsonFields header_fields(*header, "range: header");
    header_fields.DecimalInt64("revision", &view.store_revision, 0, kMaxStoreRevision);
    if (header_fields.error()) return Malformed(*header_fields.error());
  }
  if (kvs == nullptr) return view;  // etcd omits kvs when nothing matches
  for (size_t i = 0; i < kvs->size(); ++i) {
    const std::string where = "range: kvs[" + std::to_string(i) + "]";
    if (auto failure = ReadKey((*kvs)[i], where, prefix, &view)) return *failure;
  }
  return view;
}

void ApplyEtcdLease(const std::variant<nlohmann::json, ProbeFailure>& lease, LockRecord& view) {
  const auto* json = std::get_if<nlohmann::json>(&lease);
  if (!json) return;
  std::int64_t remaining = -1, granted = -1;
  JsonFields fields(*json, "lease");
  // etcd says -1 for a lease that expired; both become deadlines and /status numbers.
  fields.DecimalInt64("TTL", &remaining, -1, kMaxLeaseSeconds)
      .DecimalInt64("grantedTTL", &granted, -1, kMaxLeaseSeconds);
  if (fields.error()) {
    view.rejected.push_back(*fields.error());
    return;
  }
  view.lease_ttl_remaining = remaining;
  view.lease_granted_ttl = granted;
}

std::unique_ptr<LockWatch> EtcdScopeProbe::Watch(LockWatch::Changed on_change) {
  return std::make_unique<EtcdKeyWatch>(endpoints_, prefix_ + "leader", std::move(on_change));
}

void ReadPatroniMember(const std::string& name, const std::string& value, LockRecord& view) {
  ReadMember(name, value, &view);
}

void ReadPatroniConfig(const std::string& value, LockRecord& view) { ReadConfig(value, &view); }

}  // namespace sbd
