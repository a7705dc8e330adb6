#pragma once

// The detector's loop clients, waited for, each on an event loop of its own: a test reads an
// answer the way the detector's probes read it (on the loop, bounded as a whole), without a
// blocking twin of the client to keep in the library.
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "probes/event_loop.h"
#include "probes/http_json.h"
#include "probes/http_loop.h"
#include "probes/redis_lease.h"
#include "probes/redis_loop.h"
#include "probes/redis_wire.h"

namespace sbd::testing {

inline std::variant<nlohmann::json, ProbeFailure> FetchJsonOnLoop(
    const std::string& base_url, const std::string& path, const std::string& post_body,
    SteadyClock::time_point deadline, size_t max_bytes = kMaxResponseBytes) {
  EventLoop loop;
  std::promise<std::variant<nlohmann::json, ProbeFailure>> promise;
  auto answer = promise.get_future();
  std::unique_ptr<LoopHttpClient> client;
  loop.Post([&] {
    try {  // a throw reaches the test (the loop would count it and carry on)
      client = std::make_unique<LoopHttpClient>(loop);
      StartFetchJson(
          *client, base_url, path, post_body, deadline,
          [&](std::variant<nlohmann::json, ProbeFailure> result) {
            promise.set_value(std::move(result));
          },
          max_bytes);
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
  });
  // The client answers by its deadline; far beyond it, the loop itself is stuck.
  if (answer.wait_until(deadline + std::chrono::seconds(10)) != std::future_status::ready) {
    std::abort();
  }
  auto result = answer.get();
  std::promise<void> closed;
  loop.Post([&] {
    client.reset();  // the client's handles belong to the loop thread
    closed.set_value();
  });
  closed.get_future().wait();
  return result;
}

/// A LoopLeaseReader on a loop of its own, read by a blocking call: the connection is kept
/// between reads, as the detector's lock store keeps it.
class LeaseReaderOnLoop {
 public:
  LeaseReaderOnLoop(RedisEndpoint endpoint, LeaseKeys keys)
      : endpoint_(std::move(endpoint)), keys_(std::move(keys)) {}
  ~LeaseReaderOnLoop() {
    std::promise<void> closed;
    loop_.Post([&] {
      if (reader_) reader_->Close();
      reader_.reset();  // its handles belong to the loop thread
      closed.set_value();
    });
    closed.get_future().wait();
  }
  LeaseReaderOnLoop(const LeaseReaderOnLoop&) = delete;
  LeaseReaderOnLoop& operator=(const LeaseReaderOnLoop&) = delete;

  std::variant<LeaseRecord, ProbeFailure> Read(SteadyClock::time_point deadline) {
    std::promise<std::variant<LeaseRecord, ProbeFailure>> promise;
    auto answer = promise.get_future();
    loop_.Post([&] {
      try {  // a throw reaches the test (the loop would count it and carry on)
        if (!reader_) reader_ = std::make_shared<LoopLeaseReader>(loop_, endpoint_, keys_);
        reader_->Start(deadline, [&](std::variant<LeaseRecord, ProbeFailure> result) {
          promise.set_value(std::move(result));
        });
      } catch (...) {
        promise.set_exception(std::current_exception());
      }
    });
    if (answer.wait_until(deadline + std::chrono::seconds(10)) != std::future_status::ready) {
      std::abort();  // the reader answers by its deadline: the loop itself is stuck
    }
    return answer.get();
  }

 private:
  EventLoop loop_;
  RedisEndpoint endpoint_;
  LeaseKeys keys_;
  std::shared_ptr<LoopLeaseReader> reader_;  // loop thread only
};

/// A LoopRedisConnection on a loop of its own, called by blocking calls: a test's client of a
/// real Redis server or sentinel (PUBLISH, ROLE), on the same code the probes read with.
class RedisOnLoop {
 public:
  RedisOnLoop(std::string address, std::string username, std::optional<std::string> password,
              std::optional<RedisTlsSpec> tls = std::nullopt)
      : connection_(LoopRedisConnection::Create(loop_, std::move(address), std::move(username),
                                                std::move(password), std::move(tls))) {}
  ~RedisOnLoop() {
    std::promise<void> closed;
    loop_.Post([&] {
      connection_->Close();
      connection_.reset();  // its handles belong to the loop thread
      closed.set_value();
    });
    closed.get_future().wait();
  }
  RedisOnLoop(const RedisOnLoop&) = delete;
  RedisOnLoop& operator=(const RedisOnLoop&) = delete;

  /// Connects and authenticates unless connected; nullopt on success.
  std::optional<ProbeFailure> Connect(SteadyClock::time_point deadline) {
    return Wait<std::optional<ProbeFailure>>(deadline, [&](auto done) {
      connection_->Connect(deadline, [done](LoopRedisConnection::Failed failed) { done(failed); });
    });
  }

  /// Sends every command at once and reads one reply per command. Needs Connect().
  std::variant<std::vector<RedisValue>, ProbeFailure> Pipeline(
      std::vector<std::vector<std::string>> commands, SteadyClock::time_point deadline) {
    using Values = std::variant<std::vector<RedisValue>, ProbeFailure>;
    return Wait<Values>(deadline, [&](auto done) {
      connection_->Pipeline(std::move(commands), deadline,
                            [done](LoopRedisConnection::Replies replies) {
                              if (auto* failure = std::get_if<ProbeFailure>(&replies)) {
                                return done(Values(*failure));
                              }
                              std::vector<RedisValue> values;
                              for (const auto& reply : std::get<0>(replies)) {
                                values.push_back(RedisValueOf(*reply));
                              }
                              done(Values(std::move(values)));
                            });
    });
  }

 private:
  template <typename Result, typename Call>
  Result Wait(SteadyClock::time_point deadline, Call call) {
    auto promise = std::make_shared<std::promise<Result>>();
    auto answer = promise->get_future();
    loop_.Post([&] {
      try {  // a throw reaches the test (the loop would count it and carry on)
        call([promise](Result result) { promise->set_value(std::move(result)); });
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
    if (answer.wait_until(deadline + std::chrono::seconds(10)) != std::future_status::ready) {
      std::abort();  // the connection answers by its deadline: the loop itself is stuck
    }
    return answer.get();
  }

  EventLoop loop_;
  std::shared_ptr<LoopRedisConnection> connection_;  // loop thread only
};

}  // namespace sbd::testing
