#include "probes/redis_wire.h"

#include <hiredis/hiredis.h>

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

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  return Defaults()->createString(task, str, len);
}

std::string TooManyElements(int elements) {
  return "an array of " + std::to_string(elements) + " elements takes the reply over " +
         std::to_string(kMaxRedisArrayElements) + " array elements";
}

void* CreateArray(const redisReadTask* task, int elements) {
  // The reader's caps (LimitRedisReader(reader, caps)) count the reply's announced elements.
  auto* caps = static_cast<RedisReplyCaps*>(task->privdata);
  if (caps == nullptr || elements > caps->elements_left) {
    if (caps != nullptr) caps->refused_elements = elements;
    return nullptr;
  }
  if (elements > 0) caps->elements_left -= elements;
  return Defaults()->createArray(task, elements);
}

void* CreateInteger(const redisReadTask* task, long long value) {
  return Defaults()->createInteger(task, value);
}

void* CreateNil(const redisReadTask* task) { return Defaults()->createNil(task); }

void FreeObject(void* reply) { Defaults()->freeObject(reply); }

redisReplyObjectFunctions g_limited = {CreateString, CreateArray, CreateInteger, CreateNil,
                                       FreeObject};

}  // namespace

std::optional<std::string> RedisReplyCaps::RefusedArrayError() const {
  if (refused_elements < 0) return std::nullopt;
  return TooManyElements(refused_elements);
}

void LimitRedisReader(redisReader* reader, RedisReplyCaps* caps) {
  if (reader == nullptr || Defaults() == nullptr || reader->fn != Defaults()) return;
  reader->privdata = caps;
  reader->fn = &g_limited;
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
