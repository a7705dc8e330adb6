#include "probes/patroni.h"

#include "detector/common/network_text.h"
#include "probes/http_json.h"
#include "probes/json_fields.h"

namespace sbd {
namespace {

// PostgreSQL timelines are 32-bit unsigned.
constexpr std::int64_t kMaxTimeline = 0xFFFFFFFFLL;

ProbeFailure Malformed(const std::string& what) {
  return ProbeFailure{ProbeFailureReason::kProtocol, what};
}

// Patroni 3.0 still says "master"; newer releases say "primary". One word for both.
std::string NormalizeRole(const std::string& role) { return role == "master" ? "primary" : role; }

}  // namespace

std::variant<PatroniReading, ProbeFailure> PatroniRestProbe::ParsePatroni(
    const nlohmann::json& body) {
  PatroniReading reading;
  const nlohmann::json* patroni = nullptr;
  JsonFields fields(body, "/patroni");
  fields.String("state", &reading.state)
      .String("role", &reading.role)
      .Int64("timeline", &reading.timeline, 0, kMaxTimeline)
      .String("database_system_identifier", &reading.system_identifier)
      .Object("patroni", &patroni)
      .Double("dcs_last_seen", &reading.dcs_last_seen)
      .Bool("pause", &reading.pause)
      .Bool("cluster_unlocked", &reading.cluster_unlocked);
  if (fields.error()) return Malformed(*fields.error());
  reading.role = NormalizeRole(reading.role);
  if (reading.state.empty() || reading.role.empty()) {
    return Malformed("/patroni: no state or role");
  }
  if (patroni != nullptr) {
    JsonFields identity(*patroni, "/patroni: patroni");
    identity.String("scope", &reading.scope).String("name", &reading.name);
    if (identity.error()) return Malformed(*identity.error());
    reading.scope = NetworkName(reading.scope);
    reading.name = NetworkName(reading.name);
  }
  // Patroni 3.0 reports its scope but not its own name here (later releases add it).
  if (reading.scope.empty()) return Malformed("/patroni: no patroni.scope");
  return reading;
}

std::optional<ProbeFailure> PatroniRestProbe::ParseCluster(const nlohmann::json& body,
                                                           PatroniReading* reading) {
  const nlohmann::json* members = nullptr;
  JsonFields fields(body, "/cluster");
  fields.Array("members", &members);
  if (fields.error()) return Malformed(*fields.error());
  if (members == nullptr) return Malformed("/cluster: no members list");
  std::vector<PatroniClusterMember> found;
  std::string leader;
  for (size_t i = 0; i < members->size(); ++i) {
    PatroniClusterMember member;
    JsonFields m((*members)[i], "/cluster: members[" + std::to_string(i) + "]");
    m.String("name", &member.name)
        .String("role", &member.role)
        .String("state", &member.state)
        .String("api_url", &member.api_url)
        .String("host", &member.host)
        .Int("port", &member.port, 0, 65535)
        .Int64("timeline", &member.timeline, 0, kMaxTimeline);
    if (m.error()) return Malformed(*m.error());
    member.role = NormalizeRole(member.role);
    member.name = NetworkName(member.name);
    if (member.name.empty()) return Malformed("/cluster: a member has no name");
    if (member.role == "leader" || member.role == "standby_leader") leader = member.name;
    found.push_back(std::move(member));
  }
  // Nothing of a malformed answer is kept: the reading changes only when all of it parsed.
  if (!leader.empty()) reading->cluster_leader = std::move(leader);
  for (auto& member : found) reading->cluster_members.push_back(std::move(member));
  return std::nullopt;
}

/// The member's REST client and its base URL. Loop thread only (the client is made there).
struct PatroniRestProbe::Session {
  std::string base_url;
  std::unique_ptr<LoopHttpClient> client;
};

PatroniRestProbe::PatroniRestProbe(std::string base_url, EventLoop& loop)
    : loop_(loop), session_(std::make_shared<Session>()) {
  session_->base_url = std::move(base_url);
}

PatroniRestProbe::~PatroniRestProbe() {
  // The client's handles belong to the loop: close them there (dropping what is in flight).
  loop_.Post([session = std::move(session_)] { session->client.reset(); });
}

void PatroniRestProbe::Start(SteadyClock::time_point deadline, Done done) {
  if (!session_->client) session_->client = std::make_unique<LoopHttpClient>(loop_);
  // The session rides in the callbacks: a probe destroyed meanwhile drops them with its client.
  Session* session = session_.get();
  StartFetchJson(
      *session->client, session->base_url, "/patroni", "", deadline,
      [session, deadline, done = std::move(done)](auto own) {
        if (auto* failure = std::get_if<ProbeFailure>(&own)) return done(std::move(*failure));
        auto parsed = ParsePatroni(std::get<nlohmann::json>(own));
        if (auto* failure = std::get_if<ProbeFailure>(&parsed)) return done(std::move(*failure));
        StartFetchJson(
            *session->client, session->base_url, "/cluster", "", deadline,
            [reading = std::get<PatroniReading>(std::move(parsed)), done](auto cluster) mutable {
              if (auto* failure = std::get_if<ProbeFailure>(&cluster)) {
                return done(std::move(*failure));
              }
              auto failure = ParseCluster(std::get<nlohmann::json>(cluster), &reading);
              if (failure) return done(std::move(*failure));
              done(std::move(reading));
            });
      });
}

}  // namespace sbd
