#include "probes/redis_client.h"

#include <hiredis.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "detector/config/config.h"
#include "probes/redis_tls.h"
#include "probes/redis_wire.h"

namespace sbd {
namespace {

struct timeval TimeLeft(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::microseconds>(deadline - SteadyClock::now());
  struct timeval tv {};
  tv.tv_sec = static_cast<time_t>(left.count() / 1000000);
  tv.tv_usec = static_cast<suseconds_t>(left.count() % 1000000);
  return tv;
}

// The reason a hiredis error stands for: its text is strerror() for I/O errors.
ProbeFailureReason ReasonOf(int err, const std::string& text) {
  if (err == REDIS_ERR_EOF) return ProbeFailureReason::kConnectionLost;
  if (err == REDIS_ERR_PROTOCOL) return ProbeFailureReason::kProtocol;
  if (text.find("refused") != std::string::npos) return ProbeFailureReason::kRefused;
  if (text.find("temporarily unavailable") != std::string::npos ||
      text.find("timed out") != std::string::npos ||
      text.find("in progress") != std::string::npos) {
    return ProbeFailureReason::kTimeout;
  }
  if (text.find("Name or service") != std::string::npos ||
      text.find("unreachable") != std::string::npos) {
    return ProbeFailureReason::kUnreachable;
  }
  return ProbeFailureReason::kConnectionLost;
}

/// Queues `command` (binary-safe arguments) in the context's output buffer; false on failure.
bool AppendCommand(redisContext* context, const std::vector<std::string>& command) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const auto& arg : command) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  return redisAppendCommandArgv(context, static_cast<int>(argv.size()), argv.data(),
                                lengths.data()) == REDIS_OK;
}

}  // namespace

RedisValue RedisValueOf(const redisReply& reply) {
  RedisValue value;
  value.error = reply.type == REDIS_REPLY_ERROR;
  if (reply.type == REDIS_REPLY_INTEGER) value.text = std::to_string(reply.integer);
  if (reply.str != nullptr) value.text.assign(reply.str, reply.len);
  if (reply.type == REDIS_REPLY_ARRAY) {
    for (size_t i = 0; i < reply.elements; ++i) {
      const redisReply* item = reply.element[i];
      if (item == nullptr) continue;
      if (item->type == REDIS_REPLY_INTEGER) {
        value.items.push_back(std::to_string(item->integer));
      } else {
        value.items.emplace_back(item->str != nullptr ? std::string(item->str, item->len) : "");
      }
    }
  }
  return value;
}

RedisClient::RedisClient(std::string address, std::string username,
                         std::optional<std::string> password, std::optional<RedisTlsSpec> tls)
    : address_(std::move(address)),
      username_(std::move(username)),
      password_(std::move(password)),
      tls_(std::move(tls)) {}

RedisClient::~RedisClient() { Close(); }

void RedisClient::Close() {
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
  tls_connection_.reset();
  push_started_ = false;
}

ProbeFailure RedisClient::IoFailure(const char* doing) {
  const std::string text = context_ != nullptr ? context_->errstr : "out of memory";
  ProbeFailure failure{ReasonOf(context_ != nullptr ? context_->err : REDIS_ERR_OOM, text),
                       address_ + ": " + doing + ": " + text};
  Close();
  return failure;
}

std::optional<ProbeFailure> RedisClient::SetTimeout(SteadyClock::time_point deadline) {
  const struct timeval tv = TimeLeft(deadline);
  if (tv.tv_sec < 0 || (tv.tv_sec == 0 && tv.tv_usec <= 0)) {
    return ProbeFailure{ProbeFailureReason::kTimeout, address_ + ": deadline passed"};
  }
  if (context_ != nullptr && redisSetTimeout(context_, tv) != REDIS_OK) {
    return IoFailure("setting the timeout");
  }
  return std::nullopt;
}

std::optional<ProbeFailure> RedisClient::Connect(SteadyClock::time_point deadline) {
  if (context_ != nullptr || tls_connection_ != nullptr) return std::nullopt;
  if (auto late = SetTimeout(deadline)) return late;
  if (tls_) {
    tls_connection_ = std::make_unique<RedisTlsConnection>(address_, *tls_);
    if (auto failure = tls_connection_->Connect(deadline)) {
      tls_connection_.reset();
      return failure;
    }
    return Authenticate(deadline);
  }
  const HostPort at = SplitHostPort(address_, "6379");
  context_ =
      redisConnectWithTimeout(at.host.c_str(), std::atoi(at.port.c_str()), TimeLeft(deadline));
  if (context_ == nullptr || context_->err != 0) return IoFailure("connect");
  LimitRedisReplies(context_);
  return Authenticate(deadline);
}

std::optional<ProbeFailure> RedisClient::Authenticate(SteadyClock::time_point deadline) {
  if (!password_) return std::nullopt;
  std::vector<std::vector<std::string>> auth = {{"AUTH"}};
  if (!username_.empty()) auth[0].push_back(username_);
  auth[0].push_back(*password_);
  auto replies = Pipeline(auth, deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&replies)) return *failure;
  const RedisValue& reply = std::get<std::vector<RedisValue>>(replies).front();
  if (!reply.error) return std::nullopt;
  Close();
  // The server's words name the user at most, never the password.
  return ProbeFailure{ProbeFailureReason::kAuth,
                      address_ + ": AUTH refused: " + reply.text.substr(0, 120)};
}

std::variant<std::vector<RedisValue>, ProbeFailure> RedisClient::Pipeline(
    const std::vector<std::vector<std::string>>& commands, SteadyClock::time_point deadline) {
  if (tls_connection_ != nullptr) {
    auto replies = tls_connection_->Pipeline(commands, deadline);
    if (std::holds_alternative<ProbeFailure>(replies)) Close();
    return replies;
  }
  if (context_ == nullptr) return ProbeFailure{ProbeFailureReason::kInternal, "not connected"};
  for (const auto& command : commands) {
    if (!AppendCommand(context_, command)) return IoFailure("sending");
  }
  std::vector<RedisValue> values;
  std::size_t budget = kMaxRedisPipelineBytes;
  for (size_t i = 0; i < commands.size(); ++i) {
    if (auto late = SetTimeout(deadline)) {
      Close();  // replies still owed would answer the next call's commands
      return *late;
    }
    void* raw = nullptr;
    if (GetReplyBounded(context_, &raw, &budget) != REDIS_OK || raw == nullptr) {
      return IoFailure("reading");
    }
    auto* reply = static_cast<redisReply*>(raw);
    values.push_back(RedisValueOf(*reply));
    freeReplyObject(reply);
  }
  return values;
}

std::optional<ProbeFailure> RedisClient::Send(const std::vector<std::string>& command,
                                              SteadyClock::time_point deadline) {
  if (tls_connection_ != nullptr) {
    if (auto failure = tls_connection_->Send(command, deadline)) {
      Close();
      return failure;
    }
    return std::nullopt;
  }
  if (context_ == nullptr) return ProbeFailure{ProbeFailureReason::kInternal, "not connected"};
  if (auto late = SetTimeout(deadline)) return late;
  if (!AppendCommand(context_, command)) return IoFailure("sending");
  int done = 0;
  while (!done) {
    if (redisBufferWrite(context_, &done) != REDIS_OK) return IoFailure("sending");
  }
  return std::nullopt;
}

void RedisClient::BeginPushedReply() {
  if (push_started_) return;
  BeginBoundedReply();
  push_budget_ = kMaxRedisPipelineBytes;
  push_started_ = true;
}

std::variant<std::optional<RedisValue>, ProbeFailure> RedisClient::NextReply(
    SteadyClock::time_point until) {
  if (tls_connection_ == nullptr) return NextPlainReply(until);
  BeginPushedReply();
  auto read = tls_connection_->ReadPushed(until, &push_budget_);
  if (auto* failure = std::get_if<ProbeFailure>(&read)) {
    ProbeFailure failed = *failure;
    Close();
    return failed;
  }
  auto* reply = static_cast<redisReply*>(std::get<void*>(read));
  if (reply == nullptr) return std::optional<RedisValue>();
  push_started_ = false;
  RedisValue value = RedisValueOf(*reply);
  freeReplyObject(reply);
  return std::optional<RedisValue>(std::move(value));
}

std::variant<std::optional<RedisValue>, ProbeFailure> RedisClient::NextPlainReply(
    SteadyClock::time_point until) {
  if (context_ == nullptr) return ProbeFailure{ProbeFailureReason::kInternal, "not connected"};
  BeginPushedReply();
  for (;;) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(context_, &raw) != REDIS_OK) {
      const std::optional<std::string> refused = RefusedArrayError();
      if (!refused) return IoFailure("reading");
      Close();
      return ProbeFailure{ProbeFailureReason::kProtocol, address_ + ": reading: " + *refused};
    }
    if (raw != nullptr) {
      push_started_ = false;
      auto* reply = static_cast<redisReply*>(raw);
      RedisValue value = RedisValueOf(*reply);
      freeReplyObject(reply);
      return std::optional<RedisValue>(std::move(value));
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now());
    if (left.count() <= 0) return std::optional<RedisValue>();
    pollfd fd{context_->fd, POLLIN, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(std::min<long long>(left.count(), 60000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      const std::string why = std::strerror(errno);
      Close();
      return ProbeFailure{ProbeFailureReason::kConnectionLost, address_ + ": poll: " + why};
    }
    if (ready == 0) continue;  // the deadline is checked above
    const size_t before = context_->reader->len;
    if (redisBufferRead(context_) != REDIS_OK) return IoFailure("reading");
    const size_t received = context_->reader->len - before;
    if (received > push_budget_) {
      Close();
      return ProbeFailure{ProbeFailureReason::kProtocol,
                          address_ + ": reading: a reply larger than " +
                              std::to_string(kMaxRedisPipelineBytes) + " bytes"};
    }
    push_budget_ -= received;
  }
}

}  // namespace sbd
