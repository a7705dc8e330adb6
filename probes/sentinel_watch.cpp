#include "probes/sentinel_watch.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "detector/config/config.h"
#include "probes/redis_client.h"

namespace sbd {
namespace {

constexpr auto kConnectTimeout = std::chrono::milliseconds(2000);
constexpr auto kPoll = std::chrono::milliseconds(250);  // how soon a stop is noticed
constexpr auto kFirstBackoff = std::chrono::milliseconds(100);
constexpr auto kMaxBackoff = std::chrono::milliseconds(5000);
const char* const kChannels[] = {"+switch-master", "+sdown", "+odown"};

std::string Item(const RedisValue& value, size_t index) {
  return index < value.items.size() ? value.items[index] : "";
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
                             Changed on_change, SentinelAuth auth)
    : master_name_(std::move(master_name)),
      on_change_(std::move(on_change)),
      auth_(std::move(auth)) {
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

std::string SentinelWatch::LastFailure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_failure_;
}

void SentinelWatch::Failed(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  last_failure_ = why;
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
  MemberSpec source;  // the one password resolver, as the store uses it
  source.password_file = auth_.password_file;
  source.password_env = auth_.password_env;
  auto password = ResolvePassword(source);
  if (auto* error = std::get_if<std::string>(&password)) {
    Failed(address + ": " + *error);
    return false;
  }
  // Sentinel's port when the address names none (RedisClient's default is Redis's 6379).
  const bool has_port = !SplitHostPort(address, "").port.empty();
  RedisClient client(has_port ? address : address + ":26379", auth_.username,
                     std::get<std::optional<std::string>>(std::move(password)), auth_.tls);
  const auto deadline = SteadyClock::now() + kConnectTimeout;
  std::optional<ProbeFailure> failure = client.Connect(deadline);
  if (!failure) {
    failure = client.Send({"SUBSCRIBE", kChannels[0], kChannels[1], kChannels[2]}, deadline);
  }
  if (failure) {
    Failed(failure->message);  // RedisClient's words name the address, never the password
    return false;
  }
  bool subscribed = false;
  Listen(client, &subscribed);
  if (subscribed) --subscribed_;
  return subscribed;
}

void SentinelWatch::Listen(RedisClient& client, bool* subscribed) {
  while (!Stopping()) {
    auto next = client.NextReply(SteadyClock::now() + kPoll);
    if (auto* failure = std::get_if<ProbeFailure>(&next)) {
      Failed(failure->message);
      return;
    }
    const std::optional<RedisValue>& reply = std::get<std::optional<RedisValue>>(next);
    if (!reply) continue;
    const std::string kind = Item(*reply, 0);
    if (reply->error || reply->items.empty()) {
      // An error (NOAUTH, NOPERM) or anything else: not Sentinel's pub/sub.
      Failed(client.address() + ": SUBSCRIBE: " +
             (reply->error ? reply->text.substr(0, 160) : std::string("not a pub/sub reply")));
      return;
    }
    if (kind == "subscribe") {
      if (Item(*reply, 2) == "3" && !*subscribed) {
        *subscribed = true;
        ++subscribed_;
      }
    } else if (kind == "message") {
      if (SentinelEventConcerns(Item(*reply, 1), Item(*reply, 2), master_name_)) {
        ++changes_;
        on_change_();
      }
    } else {
      Failed(client.address() + ": SUBSCRIBE: not a pub/sub reply");
      return;
    }
  }
}

}  // namespace sbd
