#pragma once

// The detector's loop clients, waited for, each on an event loop of its own: a test reads an
// answer the way the detector's probes read it (on the loop, bounded as a whole), without a
// blocking twin of the client to keep in the library.
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <variant>

#include "probes/event_loop.h"
#include "probes/http_json.h"
#include "probes/http_loop.h"
#include "probes/redis_lease.h"

namespace sbd::testing {

inline std::variant<nlohmann::json, ProbeFailure> FetchJsonOnLoop(
    const std::string& base_url, const std::string& path, const std::string& post_body,
    SteadyClock::time_point deadline, size_t max_bytes = kMaxResponseBytes) {
  EventLoop loop;
  std::promise<std::variant<nlohmann::json, ProbeFailure>> promise;
  auto answer = promise.get_future();
  std::unique_ptr<LoopHttpClient> client;
  loop.Post([&] {
    client = std::make_unique<LoopHttpClient>(loop);
    StartFetchJson(
        *client, base_url, path, post_body, deadline,
        [&](std::variant<nlohmann::json, ProbeFailure> result) {
          promise.set_value(std::move(result));
        },
        max_bytes);
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
      if (!reader_) reader_ = std::make_shared<LoopLeaseReader>(loop_, endpoint_, keys_);
      reader_->Start(deadline, [&](std::variant<LeaseRecord, ProbeFailure> result) {
        promise.set_value(std::move(result));
      });
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

}  // namespace sbd::testing
