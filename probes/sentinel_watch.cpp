#include "probes/sentinel_watch.h"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "detector/config/config.h"

namespace sbd {
namespace {

constexpr int kConnectTimeoutMs = 2000;
constexpr int kPollMs = 250;                  // how soon a stop is noticed
constexpr size_t kMaxPendingBytes = 1 << 20;  // an unfinished reply larger than this is hostile
constexpr auto kFirstBackoff = std::chrono::milliseconds(100);
constexpr auto kMaxBackoff = std::chrono::milliseconds(5000);
const char* const kChannels[] = {"+switch-master", "+sdown", "+odown"};

struct ContextFree {
  void operator()(redisContext* context) const { redisFree(context); }
};
struct ReplyFree {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;
using Reply = std::unique_ptr<redisReply, ReplyFree>;

std::string Element(const redisReply& reply, size_t index) {
  if (reply.type != REDIS_REPLY_ARRAY || index >= reply.elements) return "";
  const redisReply* item = reply.element[index];
  if (item == nullptr) return "";
  if (item->type == REDIS_REPLY_INTEGER) return std::to_string(item->integer);
  if (item->type != REDIS_REPLY_STRING && item->type != REDIS_REPLY_STATUS) return "";
  return std::string(item->str, item->len);
}

}  // namespace

bool SentinelEventConcerns(const std::string& channel, const std::string& payload,
                           const std::string& master_name) {
  std::istringstream words(payload);
  std::vector<std::string> tokens;
  for (std::string word; words >> word;) tokens.push_back(word);
  if (tokens.empty()) return false;
  if (channel == "+switch-master") return tokens.front() == master_name;
  if (channel != "+sdown" && channel != "+odown") return false;
  if (tokens.size() >= 2 && tokens[0] == "master" && tokens[1] == master_name) return true;
  const auto at = std::find(tokens.begin(), tokens.end(), "@");
  return at != tokens.end() && at + 1 != tokens.end() && *(at + 1) == master_name;
}

SentinelWatch::SentinelWatch(std::vector<std::string> sentinels, std::string master_name,
                             Changed on_change)
    : master_name_(std::move(master_name)), on_change_(std::move(on_change)) {
  for (const auto& address : sentinels) {
    threads_.emplace_back([this, address] { Run(address); });
  }
}

SentinelWatch::~SentinelWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& thread : threads_) thread.join();
}

LockWatchStatus SentinelWatch::Status() const {
  LockWatchStatus status;
  status.up = subscribed_.load() > 0;
  status.breaks = breaks_.load();
  status.changes = changes_.load();
  return status;
}

bool SentinelWatch::Stopping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

void SentinelWatch::Run(const std::string& address) {
  auto backoff = kFirstBackoff;
  while (!Stopping()) {
    if (Follow(address)) {
      if (Stopping()) return;
      ++breaks_;
      backoff = kFirstBackoff;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, backoff, [this] { return stopping_; })) return;
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

bool SentinelWatch::Follow(const std::string& address) {
  const HostPort at = SplitHostPort(address, "26379");
  const timeval connect_timeout{kConnectTimeoutMs / 1000, (kConnectTimeoutMs % 1000) * 1000};
  Context context(
      redisConnectWithTimeout(at.host.c_str(), std::atoi(at.port.c_str()), connect_timeout));
  if (!context || context->err != 0) return false;
  redisSetTimeout(context.get(), connect_timeout);
  redisAppendCommand(context.get(), "SUBSCRIBE %s %s %s", kChannels[0], kChannels[1], kChannels[2]);
  int done = 0;
  while (!done) {
    if (redisBufferWrite(context.get(), &done) != REDIS_OK) return false;
  }
  bool subscribed = false;
  while (!Stopping()) {
    pollfd fd{context->fd, POLLIN, 0};
    const int ready = poll(&fd, 1, kPollMs);
    if (ready < 0) break;
    if (ready == 0) continue;
    if (redisBufferRead(context.get()) != REDIS_OK) break;
    if (context->reader->len > kMaxPendingBytes) break;
    void* raw = nullptr;
    bool failed = false;
    while (redisGetReplyFromReader(context.get(), &raw) == REDIS_OK && raw != nullptr) {
      Reply reply(static_cast<redisReply*>(raw));
      const std::string kind = Element(*reply, 0);
      if (kind == "subscribe" && Element(*reply, 2) == "3" && !subscribed) {
        subscribed = true;
        ++subscribed_;
      } else if (kind == "message" &&
                 SentinelEventConcerns(Element(*reply, 1), Element(*reply, 2), master_name_)) {
        ++changes_;
        on_change_();
      } else if (kind != "subscribe") {
        failed = kind != "message";  // an error or anything else: not Sentinel's pub/sub
      }
      raw = nullptr;
    }
    if (failed || context->err != 0) break;
  }
  if (subscribed) --subscribed_;
  return subscribed;
}

}  // namespace sbd
