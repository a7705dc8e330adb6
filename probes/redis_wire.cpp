#include "probes/redis_wire.h"

#include <hiredis/hiredis.h>

#include <cstdio>
#include <string>

namespace sbd {
namespace {

// hiredis's own reply constructors: its default table is static inside libhiredis, so it is
// read from a reader made for the purpose. The limits wrap them; everything else is theirs.
const redisReplyObjectFunctions* Defaults() {
  static const redisReplyObjectFunctions* const defaults = [] {
    redisReader* reader = redisReaderCreate();
    const redisReplyObjectFunctions* fn = reader != nullptr ? reader->fn : nullptr;
    if (reader != nullptr) redisReaderFree(reader);
    return fn;
  }();
  return defaults;
}

// What is left of the elements the reply being read on this thread may announce, and the
// announcement refused, for the error text (the constructor has no way to say it to the
// reader, which only sees a null object: "out of memory"). Nested arrays count together.
thread_local long long t_elements_left = kMaxRedisArrayElements;
thread_local int t_refused_elements = -1;

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  return Defaults()->createString(task, str, len);
}

std::string TooManyElements(int elements) {
  return "an array of " + std::to_string(elements) + " elements takes the reply over " +
         std::to_string(kMaxRedisArrayElements) + " array elements";
}

void* CreateArray(const redisReadTask* task, int elements) {
  // A reader with caps of its own (LimitRedisReader(reader, caps)) counts there.
  if (auto* caps = static_cast<RedisReplyCaps*>(task->privdata)) {
    if (elements > caps->elements_left) {
      caps->refused_elements = elements;
      return nullptr;
    }
    if (elements > 0) caps->elements_left -= elements;
    return Defaults()->createArray(task, elements);
  }
  if (elements > t_elements_left) {
    t_refused_elements = elements;
    return nullptr;
  }
  if (elements > 0) t_elements_left -= elements;
  return Defaults()->createArray(task, elements);
}

void* CreateInteger(const redisReadTask* task, long long value) {
  return Defaults()->createInteger(task, value);
}

void* CreateNil(const redisReadTask* task) { return Defaults()->createNil(task); }

void FreeObject(void* reply) { Defaults()->freeObject(reply); }

redisReplyObjectFunctions g_limited = {CreateString, CreateArray, CreateInteger, CreateNil,
                                       FreeObject};

int Fail(redisContext* context, const std::string& why) {
  context->err = REDIS_ERR_PROTOCOL;
  std::snprintf(context->errstr, sizeof(context->errstr), "%s", why.c_str());
  return REDIS_ERR;
}

// A reader error caused by a refused array gets words of its own.
int ReaderFailed(redisContext* context) {
  const std::optional<std::string> refused = RefusedArrayError();
  return refused ? Fail(context, *refused) : REDIS_ERR;
}

}  // namespace

void LimitRedisReader(redisReader* reader) {
  if (reader == nullptr || Defaults() == nullptr) return;
  // Only a reader using hiredis's own table: the wrappers call through to it.
  if (reader->fn == Defaults()) reader->fn = &g_limited;
}

void LimitRedisReplies(redisContext* context) {
  if (context != nullptr) LimitRedisReader(context->reader);
}

void BeginBoundedReply() {
  t_refused_elements = -1;
  t_elements_left = kMaxRedisArrayElements;
}

std::optional<std::string> RefusedArrayError() {
  if (t_refused_elements < 0) return std::nullopt;
  const int elements = t_refused_elements;
  t_refused_elements = -1;
  return TooManyElements(elements);
}

std::optional<std::string> RedisReplyCaps::RefusedArrayError() const {
  if (refused_elements < 0) return std::nullopt;
  return TooManyElements(refused_elements);
}

void LimitRedisReader(redisReader* reader, RedisReplyCaps* caps) {
  if (reader == nullptr || Defaults() == nullptr || reader->fn != Defaults()) return;
  reader->privdata = caps;
  reader->fn = &g_limited;
}

int GetReplyBounded(redisContext* context, void** reply, std::size_t* budget) {
  *reply = nullptr;
  BeginBoundedReply();
  if (redisGetReplyFromReader(context, reply) != REDIS_OK) return ReaderFailed(context);
  if (*reply != nullptr) return REDIS_OK;
  int written = 0;
  while (!written) {
    if (redisBufferWrite(context, &written) != REDIS_OK) return REDIS_ERR;
  }
  while (*reply == nullptr) {
    const size_t before = context->reader->len;
    if (redisBufferRead(context) != REDIS_OK) return REDIS_ERR;
    const size_t received = context->reader->len - before;
    if (received > *budget) {
      return Fail(context,
                  "replies larger than " + std::to_string(kMaxRedisPipelineBytes) + " bytes");
    }
    *budget -= received;
    if (redisGetReplyFromReader(context, reply) != REDIS_OK) return ReaderFailed(context);
  }
  return REDIS_OK;
}

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

}  // namespace sbd
