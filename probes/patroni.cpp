#include "probes/patroni.h"

#include "probes/http_json.h"

namespace sbd {
namespace {

ProbeFailure Malformed(const std::string& what) {
  return ProbeFailure{ProbeFailureReason::kProtocol, what};
}

// Patroni 3.0 still says "master"; newer releases say "primary". One word for both.
std::string NormalizeRole(const std::string& role) { return role == "master" ? "primary" : role; }

std::string Text(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number()) return it->dump();
  return {};
}

}  // namespace

std::variant<PatroniReading, ProbeFailure> PatroniRestProbe::ParsePatroni(
    const nlohmann::json& body) {
  if (!body.is_object()) return Malformed("/patroni: not a JSON object");
  PatroniReading reading;
  reading.state = Text(body, "state");
  reading.role = NormalizeRole(Text(body, "role"));
  if (reading.state.empty() || reading.role.empty()) {
    return Malformed("/patroni: no state or role");
  }
  if (auto it = body.find("timeline"); it != body.end() && it->is_number_integer()) {
    reading.timeline = it->get<std::int64_t>();
  }
  reading.system_identifier = Text(body, "database_system_identifier");
  if (auto it = body.find("patroni"); it != body.end() && it->is_object()) {
    reading.scope = Text(*it, "scope");
    reading.name = Text(*it, "name");
  }
  // Patroni 3.0 reports its scope but not its own name here (later releases add it).
  if (reading.scope.empty()) return Malformed("/patroni: no patroni.scope");
  if (auto it = body.find("dcs_last_seen"); it != body.end() && it->is_number()) {
    reading.dcs_last_seen = it->get<double>();
  }
  reading.pause = body.value("pause", false);
  reading.cluster_unlocked = body.value("cluster_unlocked", false);
  return reading;
}

std::optional<ProbeFailure> PatroniRestProbe::ParseCluster(const nlohmann::json& body,
                                                           PatroniReading* reading) {
  auto members = body.find("members");
  if (!body.is_object() || members == body.end() || !members->is_array()) {
    return Malformed("/cluster: no members list");
  }
  for (const auto& m : *members) {
    if (!m.is_object()) return Malformed("/cluster: a member is not an object");
    PatroniClusterMember member;
    member.name = Text(m, "name");
    member.role = NormalizeRole(Text(m, "role"));
    member.state = Text(m, "state");
    member.api_url = Text(m, "api_url");
    member.host = Text(m, "host");
    if (auto it = m.find("port"); it != m.end() && it->is_number_integer()) {
      member.port = it->get<int>();
    }
    if (auto it = m.find("timeline"); it != m.end() && it->is_number_integer()) {
      member.timeline = it->get<std::int64_t>();
    }
    if (member.name.empty()) return Malformed("/cluster: a member has no name");
    if (member.role == "leader" || member.role == "standby_leader") {
      reading->cluster_leader = member.name;
    }
    reading->cluster_members.push_back(std::move(member));
  }
  return std::nullopt;
}

std::variant<PatroniReading, ProbeFailure> PatroniRestProbe::Read(
    SteadyClock::time_point deadline) const {
  auto own = FetchJson(base_url_, "/patroni", "", deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&own)) return *failure;
  auto parsed = ParsePatroni(std::get<nlohmann::json>(own));
  if (auto* failure = std::get_if<ProbeFailure>(&parsed)) return *failure;
  PatroniReading reading = std::get<PatroniReading>(std::move(parsed));
  auto cluster = FetchJson(base_url_, "/cluster", "", deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&cluster)) return *failure;
  if (auto failure = ParseCluster(std::get<nlohmann::json>(cluster), &reading)) return *failure;
  return reading;
}

}  // namespace sbd
