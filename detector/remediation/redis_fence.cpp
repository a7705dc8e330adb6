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
// hiredis' blocking API: the connect is bounded by redisConnectWithTimeout and every command by
// redisSetTimeout, so a black-holed or hung server costs at most the timeout per step. Commands
// go through redisCommandArgv (no format strings). Every reply is checked for its type before it
// is read. The password is sent with AUTH only and scrubbed from every detail. TLS is not
// supported yet: hiredis 0.14 has no TLS for its blocking context.
#include "detector/remediation/redis_fence.h"

#include <hiredis.h>
#include <sys/time.h>

#include <cctype>
#include <ctime>
#include <memory>
#include <variant>
#include <vector>

namespace sbd {
namespace {

constexpr const char* kFenceToWrite = "1000000";
constexpr const char* kRaisedMaxLag = "10";
constexpr const char* kCheckKey = "splitbrain-detector:fence-check";
constexpr size_t kMaxServerText = 120;

struct ReplyFree {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;
struct ContextFree {
  void operator()(redisContext* context) const { redisFree(context); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;

FenceOutcome Failed(std::string detail) {
  return FenceOutcome{"failed", std::move(detail), 0, false, ""};
}

struct timeval ToTimeval(std::chrono::milliseconds timeout) {
  // A zero timeval would mean "wait forever" to SO_RCVTIMEO: never less than 1 ms.
  const long long ms = timeout.count() < 1 ? 1 : static_cast<long long>(timeout.count());
  struct timeval tv {};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
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

/// Sends `argv` and reads its reply. On an I/O failure or an error reply, nullptr and
/// `*failure` says which ("<what>: <reason>" or "<what> refused: <the server's words>").
Reply Ask(redisContext* context, const std::vector<std::string>& argv, const std::string& what,
          std::string* failure) {
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  for (const auto& arg : argv) {
    args.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  void* raw = redisCommandArgv(context, static_cast<int>(args.size()), args.data(), lengths.data());
  if (raw == nullptr) {
    *failure = what + ": " + (context->err != 0 ? context->errstr : "no reply");
    if (context->err == REDIS_ERR_IO && context->errstr[0] == '\0') *failure += "I/O error";
    return nullptr;
  }
  Reply reply(static_cast<redisReply*>(raw));
  if (reply->type == REDIS_REPLY_ERROR) {
    *failure = what + " refused: " + ServerText(*reply);
    return nullptr;
  }
  return reply;
}

/// Connected, timeouts set and authenticated; nullptr and `*failure` otherwise.
Context Open(const RedisFenceTarget& target, std::string* failure) {
  const HostPort at = SplitHostPort(target.address, "6379");
  Context context(redisConnectWithTimeout(at.host.c_str(), std::atoi(at.port.c_str()),
                                          ToTimeval(target.timeout)));
  if (context == nullptr) {
    *failure = "connect: out of memory";
    return nullptr;
  }
  if (context->err != 0) {
    *failure = std::string("connect: ") + context->errstr;
    return nullptr;
  }
  if (redisSetTimeout(context.get(), ToTimeval(target.timeout)) != REDIS_OK) {
    *failure = std::string("setting the timeout: ") + context->errstr;
    return nullptr;
  }
  if (!target.password) return context;
  std::vector<std::string> auth = {"AUTH"};
  if (!target.username.empty()) auth.push_back(target.username);
  auth.push_back(*target.password);
  if (Ask(context.get(), auth, "AUTH", failure) == nullptr) return nullptr;
  return context;
}

/// The server's role ("master", "slave", "sentinel"), or a failure.
std::variant<std::string, FenceOutcome> Role(redisContext* context) {
  std::string failure;
  Reply reply = Ask(context, {"ROLE"}, "ROLE", &failure);
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
std::variant<std::string, FenceOutcome> ConfigGet(redisContext* context, const std::string& name) {
  std::string failure;
  Reply reply = Ask(context, {"CONFIG", "GET", name}, "CONFIG GET " + name, &failure);
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
FenceOutcome SetAndCheck(redisContext* context, const std::string& to_write,
                         const std::string& max_lag) {
  const std::string undo = RedisFenceUndo(to_write, max_lag);
  std::vector<std::string> set = {"CONFIG", "SET", "min-replicas-to-write", kFenceToWrite};
  if (max_lag == "0") set.insert(set.end(), {"min-replicas-max-lag", kRaisedMaxLag});
  std::string failure;
  Reply reply = Ask(context, set, "CONFIG SET", &failure);
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
  Reply check = Ask(context, {"SET", kCheckKey, std::to_string(std::time(nullptr)), "PX", "1000"},
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
  if (target.tls) return Failed("TLS is not supported by the fence yet");
  std::string failure;
  Context context = Open(target, &failure);
  if (context == nullptr) return Failed(failure);
  auto role = Role(context.get());
  if (auto* outcome = std::get_if<FenceOutcome>(&role)) return *outcome;
  const std::string& name = std::get<std::string>(role);
  if (name != "master") {
    return FenceOutcome{"not_primary", "ROLE is " + name.substr(0, 40) + ": nothing changed", 0,
                        false, ""};
  }
  auto to_write = ConfigGet(context.get(), "min-replicas-to-write");
  if (auto* outcome = std::get_if<FenceOutcome>(&to_write)) return *outcome;
  auto max_lag = ConfigGet(context.get(), "min-replicas-max-lag");
  if (auto* outcome = std::get_if<FenceOutcome>(&max_lag)) return *outcome;
  FenceOutcome outcome =
      SetAndCheck(context.get(), std::get<std::string>(to_write), std::get<std::string>(max_lag));
  // Once CONFIG SET was sent, whatever its answer, the undo is said apart too.
  if (outcome.detail.find("undo: ") != std::string::npos) {
    outcome.undo = RedisFenceUndo(std::get<std::string>(to_write), std::get<std::string>(max_lag));
  }
  return outcome;
}

/// `text` with every occurrence of `secret` replaced.
std::string Scrub(std::string text, const std::optional<std::string>& secret) {
  static const std::string kRedacted = "<redacted>";
  if (!secret || secret->empty()) return text;
  for (size_t at = text.find(*secret); at != std::string::npos;
       at = text.find(*secret, at + kRedacted.size())) {
    text.replace(at, secret->size(), kRedacted);
  }
  return text;
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
  outcome.detail = Scrub(target.address + ": " + outcome.detail, target.password);
  return outcome;
}

}  // namespace sbd
