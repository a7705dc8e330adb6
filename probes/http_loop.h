#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "probes/event_loop.h"
#include "probes/probe.h"

namespace sbd {

/// The caps on one HTTP answer besides its deadline. A breach is a failure naming the cap.
struct HttpBounds {
  size_t max_status_line_bytes = 1024;
  size_t max_header_line_bytes = 8192;
  size_t max_headers = 100;
  size_t max_body_bytes = 1 << 20;
};

/// TLS and authentication of a request. Secrets here are never logged nor put in a failure.
struct HttpCredentials {
  std::string ca_file;    ///< empty: `ca_pem`, else the system's CA store
  std::string ca_pem;     ///< CA certificates (PEM) in memory, when `ca_file` is empty
  std::string cert_file;  ///< client certificate (PEM), with key_file
  std::string key_file;
  std::string bearer_token;  ///< "Authorization: Bearer ..."
  std::string basic_user;    ///< basic auth, with basic_password
  std::string basic_password;
};

/// One request: GET (empty post_body) or POST with a JSON body.
struct HttpRequest {
  std::string url;  ///< http:// or https:// only
  std::string post_body;
  std::vector<std::string> headers;  ///< "Name: value"
  HttpBounds bounds;
  HttpCredentials credentials;
};

/// A complete answer within every bound.
struct HttpAnswer {
  long status = 0;
  std::string body;
  std::string date;                ///< the Date header's value, empty without one
  SteadyClock::time_point sent{};  ///< when the request was handed to libcurl
};

using HttpResult = std::variant<HttpAnswer, ProbeFailure>;

/// An HTTP client on an EventLoop: libcurl's multi interface driven by the loop's sockets and
/// timers, so a request holds no thread whatever the endpoint does. Each request is bounded as
/// a whole by its deadline (connect, send, status, headers and body together) and by
/// HttpBounds; http and https only, no redirects, no proxy. Every client on a loop shares one
/// libcurl multi handle, whose cache keeps one idle connection per client for the next request
/// (keep-alive). One request at a time. Loop thread only, construction and
/// destruction included (a request in flight at destruction is dropped without an answer).
class SharedMulti;

class LoopHttpClient {
 public:
  using Done = std::function<void(HttpResult)>;

  explicit LoopHttpClient(EventLoop& loop);
  ~LoopHttpClient();
  LoopHttpClient(const LoopHttpClient&) = delete;
  LoopHttpClient& operator=(const LoopHttpClient&) = delete;

  /// Sends `request`; `done` runs exactly once, on the loop thread, by `deadline` (plus the
  /// loop's own lateness), never from inside Start(). `done` must not destroy this client.
  void Start(const HttpRequest& request, SteadyClock::time_point deadline, Done done);
  /// What a streamed body's chunk is handed to: "" to go on, else why the stream must stop.
  using Chunk = std::function<std::string(std::string_view chunk)>;
  /// Streaming mode (a watch): sends `request` and hands the body of a 2xx answer to `chunk`
  /// as it arrives, keeping none of it. The connect, the send, the status line and the headers
  /// must be complete by `headers_deadline` (under the same caps as Start's); then the stream
  /// lasts until the server ends it, `chunk` stops it, or no byte comes for `idle`. `done` runs
  /// exactly once, on the loop thread, never from inside StartStream(): an HttpAnswer (status,
  /// empty body) when the server ended the stream, else a failure naming the bound ("no bytes
  /// for 30000 ms", "status 404", or `chunk`'s reason). Each message's own cap is `chunk`'s.
  void StartStream(const HttpRequest& request, SteadyClock::time_point headers_deadline,
                   std::chrono::milliseconds idle, Chunk chunk, Done done);
  /// True while a request is in flight.
  bool busy() const;

 private:
  friend class SharedMulti;  // the loop's multi handle, which tells each client its answer
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// One request from a thread that is not the loop's (the alert pusher's workers, the hook
/// fence): the construction hands it to `loop`, Wait() blocks the caller (never the loop) until
/// the answer, `deadline` plus `grace` (a loop running late), or Cancel(). The client is made,
/// used and dropped on the loop thread. Never on the loop thread itself (Wait would deadlock:
/// it answers a failure at once). Cancel() is thread-safe; the rest is the caller's thread's.
class BlockingHttpCall {
 public:
  BlockingHttpCall(EventLoop& loop, HttpRequest request, SteadyClock::time_point deadline,
                   std::chrono::milliseconds grace = std::chrono::seconds(2));
  /// Hands the client to the loop thread to drop (one still in flight ends without an answer)
  /// and waits for that, at most `grace`.
  ~BlockingHttpCall();
  BlockingHttpCall(const BlockingHttpCall&) = delete;
  BlockingHttpCall& operator=(const BlockingHttpCall&) = delete;

  /// The answer or the failure; a kInternal failure when canceled, or when the loop never
  /// answered by deadline + grace. Call once.
  HttpResult Wait();
  /// Wait() returns at once (and any later Wait()).
  void Cancel();

 private:
  struct State;
  EventLoop& loop_;
  std::shared_ptr<State> state_;
  SteadyClock::time_point give_up_;
  std::chrono::milliseconds grace_;
};

}  // namespace sbd
