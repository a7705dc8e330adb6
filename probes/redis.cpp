#include "probes/redis.h"

#include "probes/redis_info.h"
#include "probes/redis_loop.h"

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

// One member's kept connection and the reading in flight; lives on the loop thread.
struct RedisProbe::Session : std::enable_shared_from_this<Session> {
  Session(EventLoop& loop, MemberSpec member, std::string username, std::optional<RedisTlsSpec> tls)
      : loop(loop),
        member(std::move(member)),
        username(std::move(username)),
        tls(std::move(tls)),
        timer(loop) {}

  void Start(SteadyClock::time_point deadline, std::shared_ptr<LoopGate> gate, Done done);
  void Connected(std::optional<ProbeFailure> failure);
  void SendReading();
  void Answered(LoopRedisConnection::Replies replies);
  void Finish(std::variant<RedisReading, ProbeFailure> result);
  void Close();

  EventLoop& loop;
  MemberSpec member;
  std::string username;
  std::optional<RedisTlsSpec> tls;
  std::shared_ptr<LoopRedisConnection> connection;  ///< null until a password is read
  LoopTimer timer;
  // The reading in flight.
  Done done;
  std::shared_ptr<LoopGate> gate;
  SteadyClock::time_point deadline{};
  Observation obs;
};

void RedisProbe::Session::Start(SteadyClock::time_point until, std::shared_ptr<LoopGate> at,
                                Done answer) {
  done = std::move(answer);
  gate = std::move(at);
  deadline = until;
  obs = Observation{};
  obs.member = member.name;
  obs.window.sent_wall = WallClock::now();
  obs.window.sent = SteadyClock::now();
  if (deadline <= obs.window.sent) {
    return Finish(ProbeFailure{ProbeFailureReason::kTimeout, "no time left"});
  }
  if (!connection) {
    // A password file may change: it is read again at each new connection.
    auto password = ResolvePassword(member);
    if (auto* error = std::get_if<std::string>(&password)) {
      return Finish(ProbeFailure{ProbeFailureReason::kConfig, *error});
    }
    connection =
        LoopRedisConnection::Create(loop, member.address, username,
                                    std::get<std::optional<std::string>>(std::move(password)), tls);
  }
  std::weak_ptr<Session> weak = shared_from_this();
  // Waiting at the gate is inside the deadline too.
  timer.Arm(deadline, [weak] {
    if (auto self = weak.lock()) {
      self->Finish(ProbeFailure{ProbeFailureReason::kTimeout, "no reading by the deadline"});
    }
  });
  connection->Connect(deadline, [weak](std::optional<ProbeFailure> failure) {
    if (auto self = weak.lock()) self->Connected(std::move(failure));
  });
}

void RedisProbe::Session::Connected(std::optional<ProbeFailure> failure) {
  if (!done) return;
  if (failure) {
    connection.reset();
    return Finish(std::move(*failure));
  }
  std::weak_ptr<Session> weak = shared_from_this();
  auto send = [weak] {
    if (auto self = weak.lock()) self->SendReading();
  };
  if (gate) {
    auto at = std::move(gate);
    gate.reset();
    at->Arrive(send);
    return;
  }
  send();
}

void RedisProbe::Session::SendReading() {
  if (!done || !connection) return;
  // The reading's window starts when the commands are sent, not when we began connecting.
  obs.window.sent_wall = WallClock::now();
  obs.window.sent = SteadyClock::now();
  std::weak_ptr<Session> weak = shared_from_this();
  connection->Pipeline(ReadingCommands(), deadline, [weak](LoopRedisConnection::Replies replies) {
    if (auto self = weak.lock()) self->Answered(std::move(replies));
  });
}

void RedisProbe::Session::Answered(LoopRedisConnection::Replies replies) {
  if (!done) return;
  obs.window.received = SteadyClock::now();
  if (auto* failure = std::get_if<ProbeFailure>(&replies)) {
    connection.reset();
    return Finish(std::move(*failure));
  }
  Finish(ReadingFrom(RedisValuesOf(std::get<std::vector<RedisReplyPtr>>(replies))));
}

void RedisProbe::Session::Finish(std::variant<RedisReading, ProbeFailure> result) {
  if (!done) return;
  timer.Stop();
  // A reading given up (its deadline) leaves replies owed on the connection: drop it.
  if (std::holds_alternative<ProbeFailure>(result) && connection && !connection->connected()) {
    connection->Close();
    connection.reset();
  }
  if (obs.window.received == SteadyClock::time_point{}) obs.window.received = SteadyClock::now();
  std::visit([this](auto&& value) { obs.result = std::move(value); }, std::move(result));
  if (gate) {
    gate->Leave();  // never ready: the others do not wait for us
    gate.reset();
  }
  auto answer = std::move(done);
  done = nullptr;
  answer(std::move(obs));
}

void RedisProbe::Session::Close() {
  timer.Stop();
  if (connection) connection->Close();
  connection.reset();
  done = nullptr;
}

RedisProbe::RedisProbe(MemberSpec member, std::string username, std::optional<RedisTlsSpec> tls,
                       EventLoop& loop)
    : loop_(loop),
      session_(std::make_shared<Session>(loop, std::move(member), std::move(username),
                                         std::move(tls))) {}

RedisProbe::~RedisProbe() {
  // The session is the loop's: close it there, after anything in flight.
  loop_.Post([session = std::move(session_)] { session->Close(); });
}

void RedisProbe::Start(SteadyClock::time_point deadline, std::shared_ptr<LoopGate> gate,
                       Done done) {
  session_->Start(deadline, std::move(gate), std::move(done));
}

}  // namespace sbd
