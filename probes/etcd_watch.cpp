#include "probes/etcd_watch.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>

#include "detector/common/base64.h"
#include "probes/http_json.h"
#include "probes/http_loop.h"
#include "probes/json_fields.h"
#include "probes/probe.h"

namespace sbd {
namespace {

constexpr auto kConnectTimeout = std::chrono::milliseconds(2000);
constexpr auto kQuietTimeout = std::chrono::milliseconds(30000);
constexpr size_t kMaxMessageBytes = 1 << 20;  // one JSON line of the stream
constexpr auto kFirstBackoff = std::chrono::milliseconds(100);
constexpr auto kMaxBackoff = std::chrono::milliseconds(5000);

// etcd writes 64-bit numbers as decimal strings; anything else is not its answer.
bool DecimalField(const nlohmann::json& object, const char* name, std::int64_t* out) {
  const auto it = object.find(name);
  if (it == object.end()) return true;
  if (!it->is_string()) return false;
  const std::string& text = it->get_ref<const std::string&>();
  if (text.empty() || text.size() > 18) return false;
  std::int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  *out = value;
  return true;
}

bool FlagField(const nlohmann::json& object, const char* name) {
  const auto it = object.find(name);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

// One event: the key's new value (a PUT, etcd omits its type) or nullopt (a DELETE).
std::optional<std::string> ReadEvent(const nlohmann::json& event, bool* ok) {
  *ok = false;
  if (!event.is_object()) return std::nullopt;
  const auto type = event.find("type");
  const bool deleted = type != event.end() && *type == "DELETE";
  if (type != event.end() && !deleted && *type != "PUT") return std::nullopt;
  const auto kv = event.find("kv");
  if (kv == event.end() || !kv->is_object()) return std::nullopt;
  *ok = true;
  if (deleted) return std::nullopt;
  const auto value = kv->find("value");
  if (value == kv->end()) return std::string();  // etcd omits an empty value
  std::optional<std::string> decoded;
  if (value->is_string()) decoded = Base64Decode(value->get_ref<const std::string&>());
  *ok = decoded.has_value();
  return decoded;
}

}  // namespace

EtcdWatchMessage EtcdWatchStream::Parse(const std::string& line) {
  EtcdWatchMessage message;
  auto parsed = ParseUntrustedJson(line);
  if (auto* problem = std::get_if<std::string>(&parsed)) {
    message.error =
        *problem == "not JSON" ? "a watch message that is not JSON" : "a watch message " + *problem;
    return message;
  }
  const nlohmann::json& json = std::get<nlohmann::json>(parsed);
  if (!json.is_object()) {
    message.error = "a watch message that is not JSON";
    return message;
  }
  if (json.contains("error")) {
    message.error = "etcd ended the watch with an error";
    return message;
  }
  const auto result = json.find("result");
  if (result == json.end() || !result->is_object()) {
    message.error = "a watch message without a result";
    return message;
  }
  const auto header = result->find("header");
  if (header != result->end() &&
      (!header->is_object() || !DecimalField(*header, "revision", &message.revision))) {
    message.error = "a watch message with a malformed header";
    return message;
  }
  message.created = FlagField(*result, "created");
  if (FlagField(*result, "canceled")) {
    std::int64_t compact = 0;
    message.compacted = DecimalField(*result, "compact_revision", &compact) && compact > 0;
    message.error =
        message.compacted ? "the watch's start revision was compacted" : "etcd cancelled the watch";
    return message;
  }
  const auto events = result->find("events");
  if (events == result->end()) return message;
  if (!events->is_array()) {
    message.error = "a watch message whose events are not a list";
    return message;
  }
  for (const auto& event : *events) {
    bool ok = false;
    auto value = ReadEvent(event, &ok);
    if (!ok) {
      message.error = "a malformed watch event";
      return message;
    }
    message.values.push_back(std::move(value));
  }
  return message;
}

bool EtcdWatchStream::Feed(const char* data, size_t length, std::vector<EtcdWatchMessage>* out) {
  for (size_t i = 0; i < length; ++i) {
    if (data[i] != '\n') {
      if (pending_.size() >= max_line_) {
        out->push_back(EtcdWatchMessage{});
        out->back().error = "a watch message longer than " + std::to_string(max_line_) + " bytes";
        return false;
      }
      pending_ += data[i];
      continue;
    }
    if (pending_.find_first_not_of(" \r\t") == std::string::npos) {
      pending_.clear();
      continue;
    }
    out->push_back(Parse(pending_));
    pending_.clear();
    if (!out->back().error.empty()) return false;
  }
  return true;
}

/// What the watch and the loop share. The counters and `mu`'s fields are thread-safe; the
/// rest is the loop thread's only.
struct EtcdKeyWatch::State {
  State(EventLoop& at, std::vector<std::string> urls, std::string watched,
        LockWatch::Changed changed)
      : loop(at),
        endpoints(std::move(urls)),
        key(std::move(watched)),
        on_change(std::move(changed)) {}

  void Start();
  void Stop();
  void Follow();
  std::string OnChunk(std::string_view chunk);
  void Ended(HttpResult result);
  /// Handles one message; false when the stream must be dropped.
  bool Handle(const EtcdWatchMessage& message);
  void Fire();
  bool Stopping();

  EventLoop& loop;
  const std::vector<std::string> endpoints;
  const std::string key;
  std::atomic<bool> up{false};
  std::atomic<std::uint64_t> breaks{0};
  std::atomic<std::uint64_t> changes{0};
  std::mutex mu;
  bool stopping = false;         // guarded by mu
  LockWatch::Changed on_change;  // guarded by mu; cleared when the watch goes
  std::string last_failure;      // guarded by mu
  // Loop thread only.
  std::unique_ptr<LoopHttpClient> client;
  std::unique_ptr<LoopTimer> retry;
  std::unique_ptr<EtcdWatchStream> stream;
  size_t index = 0;  ///< the endpoint followed
  std::chrono::milliseconds backoff = kFirstBackoff;
  bool established = false;
  SteadyClock::time_point last_bytes{};
  std::optional<std::string> last_value;  ///< the last value seen ("" after a delete)
  std::int64_t revision = 0;              ///< the last revision seen
};

bool EtcdKeyWatch::State::Stopping() {
  std::lock_guard<std::mutex> lock(mu);
  return stopping;
}

void EtcdKeyWatch::State::Fire() {
  ++changes;
  std::lock_guard<std::mutex> lock(mu);
  if (on_change) on_change();
}

void EtcdKeyWatch::State::Start() {
  if (Stopping() || endpoints.empty()) return;
  client = std::make_unique<LoopHttpClient>(loop);
  retry = std::make_unique<LoopTimer>(loop);
  Follow();
}

void EtcdKeyWatch::State::Stop() {
  client.reset();  // a stream in flight is dropped without an answer
  retry.reset();
}

void EtcdKeyWatch::State::Follow() {
  if (Stopping()) return;
  nlohmann::json create = {{"key", Base64Encode(key)}, {"progress_notify", true}};
  if (revision > 0) create["start_revision"] = std::to_string(revision + 1);
  HttpRequest request;
  request.url = UrlBase(endpoints[index]) + "/v3/watch";
  request.post_body = nlohmann::json{{"create_request", create}}.dump();
  stream = std::make_unique<EtcdWatchStream>(kMaxMessageBytes);
  established = false;
  last_bytes = SteadyClock::now();
  client->StartStream(
      request, SteadyClock::now() + kConnectTimeout, kQuietTimeout,
      [this](std::string_view chunk) { return OnChunk(chunk); },
      [this](HttpResult result) { Ended(std::move(result)); });
}

std::string EtcdKeyWatch::State::OnChunk(std::string_view chunk) {
  last_bytes = SteadyClock::now();
  std::vector<EtcdWatchMessage> messages;
  const bool usable = stream->Feed(chunk.data(), chunk.size(), &messages);
  for (const auto& message : messages) {
    if (!Handle(message)) return message.error;
    established = established || message.created;
  }
  return usable ? "" : "the watch stream is unusable";
}

bool EtcdKeyWatch::State::Handle(const EtcdWatchMessage& message) {
  revision = std::max(revision, message.revision);
  if (message.created) up = true;
  if (message.compacted) {
    // Changes in the gap are gone: say the holder may have changed, and start afresh.
    revision = 0;
    last_value.reset();
    Fire();
  }
  if (!message.error.empty()) return false;
  for (const auto& value : message.values) {
    const std::string now = value.value_or("");
    if (last_value && *last_value == now) continue;  // a rewrite of the same holder
    last_value = now;
    Fire();
  }
  return true;
}

void EtcdKeyWatch::State::Ended(HttpResult result) {
  up = false;
  if (Stopping()) return;
  const std::string where = UrlBase(endpoints[index]);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto* failure = std::get_if<ProbeFailure>(&result)) {
      last_failure = where + ": " + failure->message;
    } else {
      last_failure = where + ": the server ended the stream (status " +
                     std::to_string(std::get<HttpAnswer>(result).status) + ")";
    }
  }
  const bool quiet = SteadyClock::now() - last_bytes >= kQuietTimeout - std::chrono::seconds(1);
  auto delay = std::chrono::milliseconds(0);  // quiet is routine: resume at once
  if (!established || !quiet) {
    if (established) {
      ++breaks;
      backoff = kFirstBackoff;
    }
    index = (index + 1) % endpoints.size();
    delay = backoff;
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  // From the timer, never from inside the client's callback.
  retry->Arm(SteadyClock::now() + delay, [this] { Follow(); });
}

EtcdKeyWatch::EtcdKeyWatch(std::vector<std::string> endpoints, std::string key, Changed on_change,
                           EventLoop& loop)
    : state_(std::make_shared<State>(loop, std::move(endpoints), std::move(key),
                                     std::move(on_change))) {
  loop.Post([state = state_] { state->Start(); });
}

EtcdKeyWatch::~EtcdKeyWatch() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    state_->on_change = nullptr;  // never called after this
  }
  state_->loop.Post([state = state_] { state->Stop(); });
}

LockWatchStatus EtcdKeyWatch::Status() const {
  LockWatchStatus status;
  status.up = state_->up.load();
  status.breaks = state_->breaks.load();
  status.changes = state_->changes.load();
  return status;
}

std::string EtcdKeyWatch::LastFailure() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->last_failure;
}

}  // namespace sbd
