#include "probes/etcd.h"

#include "probes/http_json.h"

namespace sbd {
namespace {

ProbeFailure Malformed(const std::string& what) {
  return ProbeFailure{ProbeFailureReason::kProtocol, what};
}

// etcd's gateway renders 64-bit integers as JSON strings; accept numbers too.
std::int64_t Int64(const nlohmann::json& object, const char* key, std::int64_t fallback) {
  auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (const std::exception&) {
      return fallback;
    }
  }
  return fallback;
}

// The end of a prefix range: the prefix with its last byte incremented.
std::string RangeEnd(std::string prefix) {
  prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

}  // namespace

EtcdScopeProbe::EtcdScopeProbe(std::vector<std::string> endpoints, std::string dcs_namespace,
                               std::string scope)
    : endpoints_(std::move(endpoints)), prefix_(dcs_namespace + "/" + scope + "/") {}

std::variant<DcsView, ProbeFailure> EtcdScopeProbe::ParseRange(const nlohmann::json& body,
                                                               const std::string& prefix) {
  if (!body.is_object()) return Malformed("range: not a JSON object");
  DcsView view;
  auto kvs = body.find("kvs");
  if (kvs == body.end()) return view;  // etcd omits kvs when nothing matches
  if (!kvs->is_array()) return Malformed("range: kvs is not a list");
  for (const auto& kv : *kvs) {
    auto key = Base64Decode(kv.value("key", ""));
    auto value = Base64Decode(kv.value("value", ""));
    if (!key || !value) return Malformed("range: a key or value is not base64");
    if (key->rfind(prefix, 0) != 0) continue;
    const std::string name = key->substr(prefix.size());
    if (name == "leader") {
      view.holder = *value;
      view.mod_revision = Int64(kv, "mod_revision", 0);
      view.lease_id = std::to_string(Int64(kv, "lease", 0));
    } else if (name == "initialize") {
      view.initialize = *value;
    } else if (name == "config") {
      auto config = nlohmann::json::parse(*value, nullptr, false);
      if (config.is_object()) {
        auto ttl = Int64(config, "ttl", -1);
        if (ttl > 0) view.config_ttl = ttl;
      }
    } else if (name.rfind("members/", 0) == 0) {
      DcsMember member;
      member.name = name.substr(8);
      auto data = nlohmann::json::parse(*value, nullptr, false);
      if (data.is_object()) {
        member.conn_url = data.value("conn_url", "");
        member.api_url = data.value("api_url", "");
        member.role = data.value("role", "");
        member.state = data.value("state", "");
      }
      view.members.push_back(std::move(member));
    }
  }
  return view;
}

std::variant<DcsView, ProbeFailure> EtcdScopeProbe::ReadFrom(
    const std::string& endpoint, SteadyClock::time_point deadline) const {
  const nlohmann::json range = {{"key", Base64Encode(prefix_)},
                                {"range_end", Base64Encode(RangeEnd(prefix_))}};
  auto answer = FetchJson(endpoint, "/v3/kv/range", range.dump(), deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&answer)) return *failure;
  auto parsed = ParseRange(std::get<nlohmann::json>(answer), prefix_);
  if (auto* failure = std::get_if<ProbeFailure>(&parsed)) return *failure;
  DcsView view = std::get<DcsView>(std::move(parsed));
  view.endpoint = endpoint;
  if (!view.holder.empty() && view.lease_id != "0") {
    // The lease is evidence, not the verdict: if this read fails the TTL stays unknown.
    const nlohmann::json ask = {{"ID", view.lease_id}};
    auto lease = FetchJson(endpoint, "/v3/lease/timetolive", ask.dump(), deadline);
    if (auto* json = std::get_if<nlohmann::json>(&lease)) {
      view.lease_ttl_remaining = Int64(*json, "TTL", -1);
      view.lease_granted_ttl = Int64(*json, "grantedTTL", -1);
    }
  }
  return view;
}

std::variant<DcsView, ProbeFailure> EtcdScopeProbe::Read(SteadyClock::time_point deadline) {
  ProbeFailure last{ProbeFailureReason::kConfig, "no etcd endpoints"};
  for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
    const size_t index = (preferred_ + attempt) % endpoints_.size();
    // Each remaining endpoint gets an equal share of what is left, so one hung endpoint
    // cannot use up the whole deadline.
    const auto share =
        (deadline - SteadyClock::now()) / static_cast<int>(endpoints_.size() - attempt);
    auto result = ReadFrom(endpoints_[index], SteadyClock::now() + share);
    if (std::holds_alternative<DcsView>(result)) {
      preferred_ = index;
      return result;
    }
    last = std::get<ProbeFailure>(result);
    last.message = UrlBase(endpoints_[index]) + ": " + last.message;
  }
  return last;
}

}  // namespace sbd
