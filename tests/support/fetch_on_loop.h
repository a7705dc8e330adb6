#pragma once

// StartFetchJson, waited for: one request on its own event loop, as a test reads an answer
// the detector's probes read the same way (the loop client, bounded as a whole).
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <variant>

#include "probes/event_loop.h"
#include "probes/http_json.h"
#include "probes/http_loop.h"

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

}  // namespace sbd::testing
