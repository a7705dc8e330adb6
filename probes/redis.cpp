#include "probes/redis.h"

#include "probes/redis_info.h"

namespace sbd {
namespace {

// An error reply's reason: a login problem, a server still loading its data, or a refusal.
ProbeFailure ErrorReply(const std::string& text) {
  const std::string excerpt = text.substr(0, 160);
  if (text.rfind("NOAUTH", 0) == 0 || text.rfind("NOPERM", 0) == 0 ||
      text.rfind("WRONGPASS", 0) == 0) {
    return {ProbeFailureReason::kAuth, "INFO refused: " + excerpt};
  }
  if (text.rfind("LOADING", 0) == 0) return {ProbeFailureReason::kStarting, excerpt};
  return {ProbeFailureReason::kQuery, "INFO failed: " + excerpt};
}

}  // namespace

RedisProbe::RedisProbe(MemberSpec member, std::string username, std::optional<RedisTlsSpec> tls)
    : member_(std::move(member)), username_(std::move(username)), tls_(std::move(tls)) {}

const std::vector<std::vector<std::string>>& RedisProbe::ReadingCommands() {
  static const std::vector<std::vector<std::string>> commands = {
      {"INFO", "replication"}, {"INFO", "server"}, {"CONFIG", "GET", "min-replicas-to-write"}};
  return commands;
}

std::variant<RedisReading, ProbeFailure> RedisProbe::ReadingFrom(
    const std::vector<RedisValue>& replies) {
  if (replies.size() != ReadingCommands().size()) {
    return ProbeFailure{ProbeFailureReason::kProtocol, "wrong number of replies"};
  }
  for (size_t i = 0; i < 2; ++i) {
    if (replies[i].error) return ErrorReply(replies[i].text);
  }
  auto parsed = ParseRedisInfo(replies[0].text + "\r\n" + replies[1].text);
  if (auto* error = std::get_if<std::string>(&parsed)) {
    return ProbeFailure{ProbeFailureReason::kProtocol, *error};
  }
  RedisReading reading = std::get<RedisReading>(std::move(parsed));
  // Refused (an ACL without CONFIG) or odd: the threshold stays unknown.
  const RedisValue& config = replies[2];
  if (!config.error && config.items.size() == 2) ParseMinReplicasToWrite(config.items[1], reading);
  return reading;
}

std::optional<ProbeFailure> RedisProbe::EnsureConnected(SteadyClock::time_point deadline) {
  if (!client_) {
    auto password = ResolvePassword(member_);
    if (auto* error = std::get_if<std::string>(&password)) {
      return ProbeFailure{ProbeFailureReason::kConfig, *error};
    }
    client_ = std::make_unique<RedisClient>(
        member_.address, username_, std::get<std::optional<std::string>>(std::move(password)),
        tls_);
  }
  auto failure = client_->Connect(deadline);
  // A password file may change: read it again at the next connect.
  if (failure) client_.reset();
  return failure;
}

Observation RedisProbe::Probe(SteadyClock::time_point deadline, StartGate* gate) {
  // Arrive at the gate on every failure path, so the other probes do not wait for us.
  struct Arrival {
    StartGate* gate;
    ~Arrival() {
      if (gate != nullptr) gate->Arrive();
    }
  } arrival{gate};
  Observation obs;
  obs.member = member_.name;
  obs.window.sent_wall = WallClock::now();
  obs.window.sent = SteadyClock::now();
  auto fail = [&](ProbeFailure failure) {
    obs.window.received = SteadyClock::now();
    obs.result = std::move(failure);
    return obs;
  };
  if (deadline <= obs.window.sent) return fail({ProbeFailureReason::kTimeout, "no time left"});
  if (auto failure = EnsureConnected(deadline)) return fail(std::move(*failure));
  if (gate != nullptr) {
    arrival.gate = nullptr;
    gate->ArriveAndWait(deadline);
  }
  // The reading's window starts when the commands are sent, not when we began connecting.
  obs.window.sent_wall = WallClock::now();
  obs.window.sent = SteadyClock::now();
  auto replies = client_->Pipeline(ReadingCommands(), deadline);
  obs.window.received = SteadyClock::now();
  if (auto* failure = std::get_if<ProbeFailure>(&replies)) {
    client_.reset();
    obs.result = std::move(*failure);
    return obs;
  }
  std::visit([&obs](auto&& value) { obs.result = std::move(value); },
             ReadingFrom(std::get<std::vector<RedisValue>>(replies)));
  return obs;
}

}  // namespace sbd
