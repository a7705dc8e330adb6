// The Redis fence: what the opt-in remediation does to a confirmed zombie master (a replica
// promoted by hand while Sentinel's master is another server), with the zombie's own write guard.
//
// Why the write guard. `CONFIG SET min-replicas-to-write 1000000` (more replicas than the server
// can ever have), with `min-replicas-max-lag` raised to 10 when it is 0 (0 disables the guard),
// makes the server answer every write command with -NOREPLICAS while it keeps serving reads and
// keeps its replicas attached. It is:
//  - reversible: the previous values are recorded and the detail carries the CONFIG SET that
//    restores them;
//  - lasting until a restart (not written to redis.conf: a restart lifts it), unlike
//    CLIENT PAUSE ... WRITE, which ends when its timeout does;
//  - loss-free: nothing is discarded. REPLICAOF <holder> would resync the zombie from the holder
//    and throw away the writes it took, which an operator may need to reconcile.
// The fence then proves itself with a write that must be refused with NOREPLICAS.
//
// The fence talks to the zombie through LoopRedisConnection, the connection the Redis probes use,
// on a loop of its own (one thread for the fence's few seconds, never the detector's loop): the
// same TLS (CA, server name, client certificate) and AUTH as the cluster's members are read
// with, and the same bounds, one deadline per step (connect, TLS and AUTH; then each command)
// and the reply caps. Commands go as argument vectors (no format strings). Every reply is
// checked for its type before it is read. The password is sent with AUTH only and scrubbed
// from every detail.
#include "detector/remediation/redis_fence.h"

#include <hiredis.h>

#include <cctype>
#include <ctime>
#include <future>
#include <memory>
#include <variant>
#include <vector>

#include "detector/common/network_text.h"
#include "probes/event_loop.h"
#include "probes/redis_loop.h"

namespace sbd {
namespace {

constexpr const char* kFenceToWrite = "1000000";
constexpr const char* kRaisedMaxLag = "10";
constexpr const char* kCheckKey = "splitbrain-detector:fence-check";
constexpr size_t kMaxServerText = 120;

using Reply = RedisReplyPtr;

FenceOutcome Failed(std::string detail) {
  return FenceOutcome{"failed", std::move(detail), 0, false, ""};
}

const char* TypeName(int type) {
  switch (type) {
    case REDIS_REPLY_STRING:
      return "a bulk string";
    case REDIS_REPLY_ARRAY:
      return "an array";
    case REDIS_REPLY_INTEGER:
      return "an integer";
    case REDIS_REPLY_NIL:
      return "nil";
    case REDIS_REPLY_STATUS:
      return "a status";
    case REDIS_REPLY_ERROR:
      return "an error";
    default:
      return "an unknown type";
  }
}

bool IsText(const redisReply* reply) {
  return reply != nullptr && reply->str != nullptr &&
         (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS ||
          reply->type == REDIS_REPLY_ERROR);
}

/// A server's words, untrusted: at most kMaxServerText bytes, control bytes as '?'.
std::string ServerText(const redisReply& reply) {
  if (!IsText(&reply)) return "";
  std::string text(reply.str, reply.len < kMaxServerText ? reply.len : kMaxServerText);
  for (char& c : text) {
    if (std::iscntrl(static_cast<unsigned char>(c))) c = '?';
  }
  return text;
}

/// One connection to the zombie on a loop of its own; each call blocks the calling thread (the
/// remediator's worker) until the loop answers, which the connection's deadline bounds.
class Session {
 public:
  explicit Session(const RedisFenceTarget& target) : target_(target) {}
  ~Session() {
    // The connection's handles belong to the loop thread: it is dropped there, before the loop.
    auto dropped = std::make_shared<std::promise<void>>();
    auto done = dropped->get_future();
    loop_.Post([this, dropped] {
      if (conn_) conn_->Close();
      conn_.reset();
      dropped->set_value();
    });
    done.wait_for(kLoopBound);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Dialed, TLS up and authenticated; false and `*failure` otherwise.
  bool Open(std::string* failure) {
    auto done = std::make_shared<std::promise<LoopRedisConnection::Failed>>();
    auto answer = done->get_future();
    const auto deadline = SteadyClock::now() + Step();
    loop_.Post([this, done, deadline] {
      conn_ = LoopRedisConnection::Create(loop_, target_.address, target_.username,
                                          target_.password, target_.tls);
      conn_->Connect(deadline, [done](LoopRedisConnection::Failed failed) {
        done->set_value(std::move(failed));
      });
    });
    if (answer.wait_for(Step() + kLoopBound) != std::future_status::ready) {
      *failure = "connect: no answer from the fence's loop";
      return false;
    }
    const LoopRedisConnection::Failed failed = answer.get();
    if (!failed) return true;
    *failure = "connect: " + failed->message;
    return false;
  }

  /// Sends `argv` and reads its reply. On an I/O failure or an error reply, nullptr and
  /// `*failure` says which ("<what>: <reason>" or "<what> refused: <the server's words>").
  Reply Ask(const std::vector<std::string>& argv, const std::string& what, std::string* failure) {
    auto done = std::make_shared<std::promise<LoopRedisConnection::Replies>>();
    auto answer = done->get_future();
    const auto deadline = SteadyClock::now() + Step();
    loop_.Post([this, done, deadline, argv] {
      conn_->Pipeline({argv}, deadline, [done](LoopRedisConnection::Replies replies) {
        done->set_value(std::move(replies));
      });
    });
    if (answer.wait_for(Step() + kLoopBound) != std::future_status::ready) {
      *failure = what + ": no answer from the fence's loop";
      return nullptr;
    }
    LoopRedisConnection::Replies replies = answer.get();
    if (auto* failed = std::get_if<ProbeFailure>(&replies)) {
      *failure = what + ": " + failed->message;
      return nullptr;
    }
    auto& got = std::get<std::vector<RedisReplyPtr>>(replies);
    if (got.size() != 1 || got.front() == nullptr) {
      *failure = what + ": expected one reply, got " + std::to_string(got.size());
      return nullptr;
    }
    Reply reply = std::move(got.front());
    if (reply->type == REDIS_REPLY_ERROR) {
      *failure = what + " refused: " + ServerText(*reply);
      return nullptr;
    }
    return reply;
  }

 private:
  /// Beyond the connection's own deadline: the loop thread itself stuck (never expected).
  static constexpr std::chrono::seconds kLoopBound{2};
  std::chrono::milliseconds Step() const {
    return target_.timeout.count() < 1 ? std::chrono::milliseconds(1) : target_.timeout;
  }

  const RedisFenceTarget& target_;
  EventLoop loop_;  // before conn_: the connection goes first
  std::shared_ptr<LoopRedisConnection> conn_;
};

/// The server's role ("master", "slave", "sentinel"), or a failure.
std::variant<std::string, FenceOutcome> Role(Session& session) {
  std::string failure;
  Reply reply = session.Ask({"ROLE"}, "ROLE", &failure);
  if (reply == nullptr) return Failed(failure);
  if (reply->type != REDIS_REPLY_ARRAY) {
    return Failed(std::string("ROLE: expected an array, got ") + TypeName(reply->type));
  }
  if (reply->elements == 0 || !IsText(reply->element[0]) ||
      reply->element[0]->type == REDIS_REPLY_ERROR) {
    return Failed("ROLE: the reply does not start with the role's name");
  }
  return std::string(reply->element[0]->str, reply->element[0]->len);
}

bool IsCount(const std::string& text) {
  if (text.empty() || text.size() > 18) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

/// The value of the integer parameter `name` (CONFIG GET), or a failure.
std::variant<std::string, FenceOutcome> ConfigGet(Session& session, const std::string& name) {
  std::string failure;
  Reply reply = session.Ask({"CONFIG", "GET", name}, "CONFIG GET " + name, &failure);
  if (reply == nullptr) return Failed(failure);
  if (reply->type != REDIS_REPLY_ARRAY) {
    return Failed("CONFIG GET " + name + ": expected an array, got " + TypeName(reply->type));
  }
  if (reply->elements != 2 || !IsText(reply->element[1]) ||
      reply->element[1]->type == REDIS_REPLY_ERROR) {
    return Failed("CONFIG GET " + name + ": expected the name and its value, got " +
                  std::to_string(reply->elements) + " element(s)");
  }
  std::string value(reply->element[1]->str, reply->element[1]->len);
  if (!IsCount(value)) {
    return Failed("CONFIG GET " + name +
                  ": the value is not a count: " + ServerText(*reply->element[1]));
  }
  return value;
}

/// Sets the guard and proves it with a write that must get NOREPLICAS.
FenceOutcome SetAndCheck(Session& session, const std::string& to_write,
                         const std::string& max_lag) {
  const std::string undo = RedisFenceUndo(to_write, max_lag);
  std::vector<std::string> set = {"CONFIG", "SET", "min-replicas-to-write", kFenceToWrite};
  if (max_lag == "0") set.insert(set.end(), {"min-replicas-max-lag", kRaisedMaxLag});
  std::string failure;
  Reply reply = session.Ask(set, "CONFIG SET", &failure);
  if (reply == nullptr) {
    return Failed(failure + " (should it have applied, the undo: " + undo + ")");
  }
  if (reply->type != REDIS_REPLY_STATUS) {
    return Failed(std::string("CONFIG SET: expected a status, got ") + TypeName(reply->type) +
                  "; undo: " + undo);
  }
  const std::string recorded = "min-replicas-to-write " + std::string(kFenceToWrite) + " (was " +
                               to_write + "), min-replicas-max-lag " +
                               (max_lag == "0" ? kRaisedMaxLag : max_lag) + " (was " + max_lag +
                               ")";
  const std::string again = to_write == kFenceToWrite
                                ? " (already at the fence's value: an earlier fence's undo holds "
                                  "the values before it)"
                                : "";
  Reply check = session.Ask({"SET", kCheckKey, std::to_string(std::time(nullptr)), "PX", "1000"},
                            "the check write", &failure);
  if (check != nullptr) {
    return Failed(recorded + ", but the check write was accepted" + again + "; undo: " + undo);
  }
  if (failure.find("refused: NOREPLICAS") == std::string::npos) {
    return Failed(recorded + ", but the check write was not refused with NOREPLICAS (" + failure +
                  ")" + again + "; undo: " + undo);
  }
  return FenceOutcome{"fenced",
                      recorded + "; writes refused with NOREPLICAS" + again + "; undo: " + undo, 0,
                      true, ""};
}

FenceOutcome Fence(const RedisFenceTarget& target) {
  std::string failure;
  Session session(target);
  if (!session.Open(&failure)) return Failed(failure);
  auto role = Role(session);
  if (auto* outcome = std::get_if<FenceOutcome>(&role)) return *outcome;
  const std::string& name = std::get<std::string>(role);
  if (name != "master") {
    return FenceOutcome{"not_primary", "ROLE is " + name.substr(0, 40) + ": nothing changed", 0,
                        false, ""};
  }
  auto to_write = ConfigGet(session, "min-replicas-to-write");
  if (auto* outcome = std::get_if<FenceOutcome>(&to_write)) return *outcome;
  auto max_lag = ConfigGet(session, "min-replicas-max-lag");
  if (auto* outcome = std::get_if<FenceOutcome>(&max_lag)) return *outcome;
  FenceOutcome outcome =
      SetAndCheck(session, std::get<std::string>(to_write), std::get<std::string>(max_lag));
  // Once CONFIG SET was sent, whatever its answer, the undo is said apart too.
  if (outcome.detail.find("undo: ") != std::string::npos) {
    outcome.undo = RedisFenceUndo(std::get<std::string>(to_write), std::get<std::string>(max_lag));
  }
  return outcome;
}

}  // namespace

std::string RedisFenceUndo(const std::string& to_write, const std::string& max_lag) {
  return "CONFIG SET min-replicas-to-write " + to_write + " min-replicas-max-lag " + max_lag;
}

FenceOutcome FenceRedis(const RedisFenceTarget& target) {
  FenceOutcome outcome;
  try {
    outcome = Fence(target);
  } catch (const std::exception& e) {
    outcome = Failed(std::string("internal error: ") + e.what());
  } catch (...) {
    outcome = Failed("internal error");
  }
  outcome.detail = ScrubSecret(target.address + ": " + outcome.detail, target.password);
  return outcome;
}

}  // namespace sbd
