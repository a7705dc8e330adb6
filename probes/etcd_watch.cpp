#include "probes/etcd_watch.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "detector/common/base64.h"
#include "probes/json_fields.h"
#include "probes/probe.h"

namespace sbd {
namespace {

constexpr auto kConnectTimeout = std::chrono::seconds(2);
constexpr auto kQuietTimeout = std::chrono::seconds(30);
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

EtcdKeyWatch::EtcdKeyWatch(std::vector<std::string> endpoints, std::string key, Changed on_change)
    : endpoints_(std::move(endpoints)),
      key_(std::move(key)),
      on_change_(std::move(on_change)),
      thread_([this] { Run(); }) {}

EtcdKeyWatch::~EtcdKeyWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (client_ != nullptr) client_->stop();
  }
  cv_.notify_all();
  thread_.join();
}

LockWatchStatus EtcdKeyWatch::Status() const {
  LockWatchStatus status;
  status.up = up_.load();
  status.breaks = breaks_.load();
  status.changes = changes_.load();
  return status;
}

bool EtcdKeyWatch::Pause(std::chrono::milliseconds delay) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, delay, [this] { return stopping_; });
}

void EtcdKeyWatch::Run() {
  if (endpoints_.empty()) return;
  size_t index = 0;
  auto backoff = kFirstBackoff;
  while (true) {
    const StreamEnd end = Follow(endpoints_[index]);
    up_ = false;
    if (end == StreamEnd::kStopped) return;
    if (end == StreamEnd::kQuiet) continue;  // routine: resume from the last revision at once
    if (end == StreamEnd::kBroken) {
      ++breaks_;
      backoff = kFirstBackoff;
    }
    index = (index + 1) % endpoints_.size();
    if (!Pause(backoff)) return;
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

bool EtcdKeyWatch::Handle(const EtcdWatchMessage& message) {
  revision_ = std::max(revision_, message.revision);
  if (message.created) up_ = true;
  if (message.compacted) {
    // Changes in the gap are gone: say the holder may have changed, and start afresh.
    revision_ = 0;
    last_value_.reset();
    ++changes_;
    on_change_();
  }
  if (!message.error.empty()) return false;
  for (const auto& value : message.values) {
    const std::string now = value.value_or("");
    if (last_value_ && *last_value_ == now) continue;  // a rewrite of the same holder
    last_value_ = now;
    ++changes_;
    on_change_();
  }
  return true;
}

EtcdKeyWatch::StreamEnd EtcdKeyWatch::Follow(const std::string& endpoint) {
  nlohmann::json create = {{"key", Base64Encode(key_)}, {"progress_notify", true}};
  if (revision_ > 0) create["start_revision"] = std::to_string(revision_ + 1);
  httplib::Request request;
  request.method = "POST";
  request.path = "/v3/watch";
  request.body = nlohmann::json{{"create_request", create}}.dump();
  request.set_header("Content-Type", "application/json");
  EtcdWatchStream stream;
  bool established = false;
  auto last_bytes = SteadyClock::now();
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    last_bytes = SteadyClock::now();
    std::vector<EtcdWatchMessage> messages;
    const bool usable = stream.Feed(data, length, &messages);
    for (const auto& message : messages) {
      if (!Handle(message)) return false;
      established = established || message.created;
    }
    return usable;
  };
  try {
    // The endpoint comes from the config; httplib throws on a scheme or port it cannot use.
    httplib::Client client(endpoint);
    client.set_connection_timeout(kConnectTimeout);
    client.set_read_timeout(kQuietTimeout);
    client.set_keep_alive(false);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return StreamEnd::kStopped;
      client_ = &client;
    }
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    client.send(request, response, error);
    std::lock_guard<std::mutex> lock(mu_);
    client_ = nullptr;
    if (stopping_) return StreamEnd::kStopped;
  } catch (const std::exception&) {
    return StreamEnd::kFailed;
  }
  if (!established) return StreamEnd::kFailed;
  const bool quiet = SteadyClock::now() - last_bytes >= kQuietTimeout - std::chrono::seconds(1);
  return quiet ? StreamEnd::kQuiet : StreamEnd::kBroken;
}

}  // namespace sbd
