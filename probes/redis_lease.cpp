#include "probes/redis_lease.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <set>

#include "detector/common/logfmt.h"
#include "probes/redis_loop.h"
#include "probes/redis_wire.h"

namespace sbd {

namespace {

bool Contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

// An error reply (-ERR ...): authentication and permission problems are kAuth.
ProbeFailure ErrorReplyFailure(const redisReply& reply, const std::string& what) {
  const std::string text(reply.str, reply.len);
  const std::string message = what + ": " + LogfmtEscape(text.substr(0, 200));
  if (text.rfind("WRONGPASS", 0) == 0 || text.rfind("NOAUTH", 0) == 0 ||
      text.rfind("NOPERM", 0) == 0 || Contains(text, "invalid password")) {
    return {ProbeFailureReason::kAuth, message};
  }
  if (text.rfind("LOADING", 0) == 0 || text.rfind("BUSY", 0) == 0) {
    return {ProbeFailureReason::kStarting, message};
  }
  return {ProbeFailureReason::kQuery, message};
}

using Command = std::vector<std::string>;

ProbeFailure Unexpected(const std::string& what) {
  return {ProbeFailureReason::kProtocol, what + ": unexpected reply type"};
}

// One key from its TYPE, GETRANGE, STRLEN and PTTL replies (not atomic: a key replaced in
// between shows the newer TYPE; its GETRANGE error then reads as another type).
std::variant<LeaseKeyReading, ProbeFailure> InterpretKey(const std::string& key,
                                                         const redisReply* const replies[4]) {
  const redisReply& type = *replies[0];
  const redisReply& value = *replies[1];
  const redisReply& length = *replies[2];
  const redisReply& pttl = *replies[3];
  if (type.type == REDIS_REPLY_ERROR) return ErrorReplyFailure(type, "TYPE");
  if (pttl.type == REDIS_REPLY_ERROR) return ErrorReplyFailure(pttl, "PTTL");
  if (type.type != REDIS_REPLY_STATUS && type.type != REDIS_REPLY_STRING) return Unexpected("TYPE");
  if (pttl.type != REDIS_REPLY_INTEGER) return Unexpected("PTTL");
  // -2 gone, -1 no TTL, else milliseconds left; beyond the bound it is no Redis's answer, and
  // the seconds it becomes ((ms + 999) / 1000) would wrap.
  if (pttl.integer < -2 || pttl.integer > kMaxLeasePttlMs) {
    return ProbeFailure{ProbeFailureReason::kProtocol, "PTTL " + std::to_string(pttl.integer) +
                                                           " is out of range -2.." +
                                                           std::to_string(kMaxLeasePttlMs)};
  }
  LeaseKeyReading reading;
  reading.key = key;
  reading.type.assign(type.str, std::min<size_t>(type.len, 64));
  reading.lease_left_ms = pttl.integer;
  if (reading.type == "none") {
    reading.state = LeaseKeyReading::State::kGone;
    return reading;
  }
  bool wrong_type = value.type == REDIS_REPLY_ERROR &&
                    std::string(value.str, value.len).rfind("WRONGTYPE", 0) == 0;
  if (reading.type != "string" || wrong_type) {
    reading.state = LeaseKeyReading::State::kWrongType;
    return reading;
  }
  if (value.type == REDIS_REPLY_ERROR) return ErrorReplyFailure(value, "GETRANGE");
  if (length.type == REDIS_REPLY_ERROR) return ErrorReplyFailure(length, "STRLEN");
  if (value.type != REDIS_REPLY_STRING) return Unexpected("GETRANGE");
  if (length.type != REDIS_REPLY_INTEGER) return Unexpected("STRLEN");
  if (length.integer < 0) return Unexpected("STRLEN");
  reading.state = LeaseKeyReading::State::kHeld;
  reading.token.assign(value.str, value.len);
  reading.token_length = length.integer;
  reading.token_truncated = length.integer > static_cast<long long>(value.len);
  return reading;
}

// One SCAN reply into `found`: nullopt and `*cursor` the next cursor ("0" when done), or why
// the reply is no SCAN answer. Stops at max_keys, saying so in `*limit_hit`.
std::optional<ProbeFailure> TakeScanBatch(const redisReply& reply, const LeaseKeys& keys,
                                          std::set<std::string>& found, std::string* cursor,
                                          std::string* limit_hit) {
  if (reply.type == REDIS_REPLY_ERROR) return ErrorReplyFailure(reply, "SCAN");
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2 ||
      reply.element[0]->type != REDIS_REPLY_STRING || reply.element[1]->type != REDIS_REPLY_ARRAY) {
    return Unexpected("SCAN");
  }
  const redisReply& batch = *reply.element[1];
  for (size_t i = 0; i < batch.elements; ++i) {
    if (batch.element[i]->type != REDIS_REPLY_STRING) return Unexpected("SCAN");
    if (found.size() == keys.max_keys) {
      *limit_hit = "max_keys " + std::to_string(keys.max_keys);
      *cursor = "0";
      return std::nullopt;
    }
    found.emplace(batch.element[i]->str, batch.element[i]->len);
  }
  cursor->assign(reply.element[0]->str, reply.element[0]->len);
  return std::nullopt;
}

// The four commands read for each key.
std::vector<Command> KeyCommands(const std::vector<std::string>& names, const LeaseKeys& keys) {
  std::vector<Command> commands;
  const std::string last = std::to_string(std::max<size_t>(keys.max_token_bytes, 1) - 1);
  for (const auto& name : names) {
    commands.push_back({"TYPE", name});
    commands.push_back({"GETRANGE", name, "0", last});
    commands.push_back({"STRLEN", name});
    commands.push_back({"PTTL", name});
  }
  return commands;
}

}  // namespace

std::string LeaseKeyReading::TokenShown() const { return LogfmtEscape(token); }

LoopLeaseReader::LoopLeaseReader(EventLoop& loop, RedisEndpoint endpoint, LeaseKeys keys)
    : loop_(loop), endpoint_(std::move(endpoint)), keys_(std::move(keys)) {}

LoopLeaseReader::~LoopLeaseReader() { Close(); }

void LoopLeaseReader::Close() {
  done_ = nullptr;
  if (connection_) connection_->Close();
  connection_.reset();
}

void LoopLeaseReader::Start(SteadyClock::time_point deadline, Done done) {
  done_ = std::move(done);
  deadline_ = deadline;
  record_ = LeaseRecord{};
  record_.endpoint = endpoint_.host + ":" + std::to_string(endpoint_.port);
  found_.clear();
  cursor_ = "0";
  round_ = 0;
  std::optional<ProbeFailure> early;
  if (SteadyClock::now() >= deadline) {
    early = ProbeFailure{ProbeFailureReason::kTimeout, "no time left"};
  } else if (keys_.pattern.empty() && keys_.names.empty()) {
    early = ProbeFailure{ProbeFailureReason::kConfig, "no key names and no pattern"};
  } else if (endpoint_.port <= 0 || endpoint_.port > 65535 || endpoint_.host.empty()) {
    early = ProbeFailure{ProbeFailureReason::kConfig, "no usable host and port"};
  }
  std::weak_ptr<LoopLeaseReader> weak = shared_from_this();
  if (early) {
    loop_.Post([weak, failure = *early] {
      if (auto self = weak.lock()) self->Finish(failure);
    });
    return;
  }
  if (!connection_) {
    std::optional<std::string> password;
    if (!endpoint_.password.empty()) password = endpoint_.password;
    connection_ = LoopRedisConnection::Create(loop_, record_.endpoint, endpoint_.user, password,
                                              std::nullopt);
  }
  connection_->Connect(deadline, [weak](std::optional<ProbeFailure> failure) {
    auto self = weak.lock();
    if (!self || !self->done_) return;
    if (failure) return self->Finish(std::move(*failure));
    self->record_.window.sent_wall = WallClock::now();
    self->record_.window.sent = SteadyClock::now();
    if (self->keys_.pattern.empty()) return self->ReadKeys();
    self->ScanRound();
  });
}

void LoopLeaseReader::ScanRound() {
  if (round_ == keys_.max_iterations) {
    record_.scan_limit_hit = "max_iterations " + std::to_string(keys_.max_iterations);
    return ReadKeys();
  }
  ++round_;
  std::weak_ptr<LoopLeaseReader> weak = shared_from_this();
  connection_->Pipeline(
      {{"SCAN", cursor_, "MATCH", keys_.pattern, "COUNT", "100"}}, deadline_,
      [weak](LoopRedisConnection::Replies replies) {
        auto self = weak.lock();
        if (!self || !self->done_) return;
        if (auto* failure = std::get_if<ProbeFailure>(&replies)) return self->Finish(*failure);
        const redisReply& reply = *std::get<std::vector<RedisReplyPtr>>(replies)[0];
        if (auto bad = TakeScanBatch(reply, self->keys_, self->found_, &self->cursor_,
                                     &self->record_.scan_limit_hit)) {
          return self->Finish(std::move(*bad));
        }
        if (self->cursor_ == "0") return self->ReadKeys();
        self->ScanRound();
      });
}

void LoopLeaseReader::ReadKeys() {
  std::vector<std::string> names =
      keys_.pattern.empty() ? keys_.names : std::vector<std::string>(found_.begin(), found_.end());
  if (names.empty()) {
    record_.window.received = SteadyClock::now();
    return Finish(std::move(record_));
  }
  auto window = std::make_shared<ReadingWindow>();
  window->sent_wall = WallClock::now();
  window->sent = SteadyClock::now();
  std::weak_ptr<LoopLeaseReader> weak = shared_from_this();
  connection_->Pipeline(KeyCommands(names, keys_), deadline_,
                        [weak, names, window](LoopRedisConnection::Replies replies) {
                          auto self = weak.lock();
                          if (!self || !self->done_) return;
                          window->received = SteadyClock::now();
                          if (auto* failure = std::get_if<ProbeFailure>(&replies))
                            return self->Finish(*failure);
                          const auto& all = std::get<std::vector<RedisReplyPtr>>(replies);
                          for (size_t i = 0; i < names.size(); ++i) {
                            const redisReply* four[4] = {all[4 * i].get(), all[4 * i + 1].get(),
                                                         all[4 * i + 2].get(),
                                                         all[4 * i + 3].get()};
                            auto key = InterpretKey(names[i], four);
                            if (auto* failure = std::get_if<ProbeFailure>(&key))
                              return self->Finish(*failure);
                            self->record_.keys.push_back(std::move(std::get<LeaseKeyReading>(key)));
                            self->record_.keys.back().window = *window;
                          }
                          self->record_.window.received = window->received;
                          self->Finish(std::move(self->record_));
                        });
}

void LoopLeaseReader::Finish(std::variant<LeaseRecord, ProbeFailure> result) {
  if (!done_) return;
  // The stream may hold replies never read: start afresh next time.
  if (std::holds_alternative<ProbeFailure>(result) && connection_) {
    connection_->Close();
    connection_.reset();
  }
  auto done = std::move(done_);
  done_ = nullptr;
  done(std::move(result));
}

}  // namespace sbd
