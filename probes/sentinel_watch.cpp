#include "probes/sentinel_watch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <sstream>

#include "detector/config/config.h"
#include "probes/redis_loop.h"
#include "probes/redis_wire.h"

namespace sbd {
namespace {

constexpr auto kConnectTimeout = std::chrono::milliseconds(2000);
constexpr auto kSubscribeTimeout = std::chrono::milliseconds(2000);
constexpr auto kReplyBound = std::chrono::milliseconds(2000);  // a begun push must end within
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

/// What the watch and the loop share. The counters and `mu`'s fields are thread-safe; the
/// followers are the loop thread's only.
struct SentinelWatch::State {
  /// One sentinel's subscription, re-established after each failure.
  struct Follower {
    explicit Follower(EventLoop& loop, std::string at) : address(std::move(at)), retry(loop) {}
    std::string address;
    std::shared_ptr<LoopRedisConnection> connection;
    LoopTimer retry;
    std::chrono::milliseconds backoff = kFirstBackoff;
    bool subscribed = false;
  };

  State(EventLoop& at, std::string master, Changed changed, SentinelAuth credentials)
      : loop(at),
        master_name(std::move(master)),
        auth(std::move(credentials)),
        on_change(std::move(changed)) {}

  void Start(const std::vector<std::string>& sentinels);
  void Stop();
  void Follow(Follower* follower);
  void Subscribe(Follower* follower);
  void OnPush(Follower* follower, const RedisValue& reply);
  void Ended(Follower* follower, const std::string& why);
  void Retry(Follower* follower);
  void Failed(const std::string& why);
  void Fire();
  bool Stopping();

  EventLoop& loop;
  const std::string master_name;
  const SentinelAuth auth;
  std::atomic<int> subscribed{0};
  std::atomic<std::uint64_t> breaks{0};
  std::atomic<std::uint64_t> changes{0};
  std::mutex mu;
  bool stopping = false;                             // guarded by mu; set when the watch goes
  Changed on_change;                                 // guarded by mu; cleared when the watch goes
  std::string last_failure;                          // guarded by mu
  std::vector<std::unique_ptr<Follower>> followers;  // loop thread only
};

void SentinelWatch::State::Start(const std::vector<std::string>& sentinels) {
  if (Stopping()) return;
  for (const auto& address : sentinels) {
    followers.push_back(std::make_unique<Follower>(loop, address));
    Follow(followers.back().get());
  }
}

void SentinelWatch::State::Stop() {
  // Closed connections and stopped timers call back no more, so no pointer to a follower
  // outlives it.
  for (auto& follower : followers) {
    if (follower->connection) follower->connection->Close();
    follower->retry.Stop();
  }
  followers.clear();
}

bool SentinelWatch::State::Stopping() {
  std::lock_guard<std::mutex> lock(mu);
  return stopping;
}

void SentinelWatch::State::Failed(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu);
  last_failure = why;
}

void SentinelWatch::State::Fire() {
  std::lock_guard<std::mutex> lock(mu);
  if (on_change) on_change();
}

void SentinelWatch::State::Follow(Follower* follower) {
  if (Stopping()) return;
  MemberSpec source;  // the one password resolver, as the store uses it
  source.password_file = auth.password_file;
  source.password_env = auth.password_env;
  auto password = ResolvePassword(source);
  if (auto* error = std::get_if<std::string>(&password)) {
    Failed(follower->address + ": " + *error);
    return Retry(follower);
  }
  // Sentinel's port when the address names none (the connection's default is Redis's 6379).
  const bool has_port = !SplitHostPort(follower->address, "").port.empty();
  if (follower->connection) follower->connection->Close();
  follower->connection = LoopRedisConnection::Create(
      loop, has_port ? follower->address : follower->address + ":26379", auth.username,
      std::get<std::optional<std::string>>(std::move(password)), auth.tls);
  follower->connection->Connect(SteadyClock::now() + kConnectTimeout,
                                [this, follower](LoopRedisConnection::Failed failure) {
                                  // The connection's words name the address, never the password.
                                  if (failure) return Ended(follower, failure->message);
                                  Subscribe(follower);
                                });
}

void SentinelWatch::State::Subscribe(Follower* follower) {
  follower->connection->Subscribe(
      {"SUBSCRIBE", kChannels[0], kChannels[1], kChannels[2]},
      SteadyClock::now() + kSubscribeTimeout, kReplyBound,
      [this, follower](RedisReplyPtr reply) { OnPush(follower, RedisValueOf(*reply)); },
      [this, follower](ProbeFailure failure) { Ended(follower, failure.message); });
}

void SentinelWatch::State::OnPush(Follower* follower, const RedisValue& reply) {
  const std::string kind = Item(reply, 0);
  const std::string& address = follower->connection->address();
  if (reply.error || reply.items.empty() || (kind != "subscribe" && kind != "message")) {
    // An error (NOAUTH, NOPERM) or anything else: not Sentinel's pub/sub.
    const std::string why =
        reply.error ? reply.text.substr(0, 160) : std::string("not a pub/sub reply");
    follower->connection->Close();
    return Ended(follower, address + ": SUBSCRIBE: " + why);
  }
  if (kind == "subscribe") {
    if (Item(reply, 2) == "3" && !follower->subscribed) {
      follower->subscribed = true;
      follower->backoff = kFirstBackoff;
      ++subscribed;
    }
    return;
  }
  if (SentinelEventConcerns(Item(reply, 1), Item(reply, 2), master_name)) {
    ++changes;
    Fire();
  }
}

void SentinelWatch::State::Ended(Follower* follower, const std::string& why) {
  Failed(why);
  if (follower->subscribed) {
    follower->subscribed = false;
    --subscribed;
    ++breaks;
  }
  Retry(follower);
}

void SentinelWatch::State::Retry(Follower* follower) {
  if (Stopping()) return;
  follower->retry.Arm(SteadyClock::now() + follower->backoff,
                      [this, follower] { Follow(follower); });
  follower->backoff = std::min(follower->backoff * 2, kMaxBackoff);
}

SentinelWatch::SentinelWatch(std::vector<std::string> sentinels, std::string master_name,
                             Changed on_change, SentinelAuth auth, EventLoop& loop)
    : state_(std::make_shared<State>(loop, std::move(master_name), std::move(on_change),
                                     std::move(auth))) {
  loop.Post([state = state_, sentinels = std::move(sentinels)] { state->Start(sentinels); });
}

SentinelWatch::~SentinelWatch() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    state_->on_change = nullptr;  // never called after this
  }
  state_->loop.Post([state = state_] { state->Stop(); });
}

LockWatchStatus SentinelWatch::Status() const {
  LockWatchStatus status;
  status.up = state_->subscribed.load() > 0;
  status.breaks = state_->breaks.load();
  status.changes = state_->changes.load();
  return status;
}

std::string SentinelWatch::LastFailure() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->last_failure;
}

}  // namespace sbd
