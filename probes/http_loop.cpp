#include "probes/http_loop.h"

#include <curl/curl.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace sbd {

namespace {

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// "GET /metrics": how a failure names its request (never the query string nor credentials).
std::string RequestName(const HttpRequest& request) {
  const auto scheme_end = request.url.find("://");
  const size_t host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const auto path_start = request.url.find('/', host_start);
  std::string path = path_start == std::string::npos ? "/" : request.url.substr(path_start);
  path = path.substr(0, path.find_first_of("?#"));
  return (request.post_body.empty() ? "GET " : "POST ") + path;
}

ProbeFailureReason ReasonOf(CURLcode code) {
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return ProbeFailureReason::kTimeout;
    case CURLE_COULDNT_CONNECT:
      return ProbeFailureReason::kRefused;
    case CURLE_COULDNT_RESOLVE_HOST:
      return ProbeFailureReason::kUnreachable;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_LOGIN_DENIED:
      return ProbeFailureReason::kConfig;
    case CURLE_PEER_FAILED_VERIFICATION:
      return ProbeFailureReason::kAuth;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
      return ProbeFailureReason::kConnectionLost;
    default:
      return ProbeFailureReason::kProtocol;
  }
}

}  // namespace

// The libcurl multi handles of an event loop, each shared by up to kClientsPerMulti
// LoopHttpClients on it: one wakeup socketpair (libcurl 7.88 makes one per multi), one timer and
// one connection cache for them all. A multi per client cost three file descriptors and about
// 100 KB a member (10,000 claim members ran out of descriptors); one multi for every client
// made each request search one cache of thousands of connections to the same endpoint. Loop
// thread only, but for Get().
class SharedMulti : public std::enable_shared_from_this<SharedMulti> {
 public:
  static constexpr long kClientsPerMulti = 64;

  /// A multi of the loop's with room for one more client, made when none has; the caller is
  /// counted as its client until Release().
  static std::shared_ptr<SharedMulti> Get(EventLoop& loop) {
    std::lock_guard<std::mutex> lock(Mutex());
    auto& multis = Multis()[&loop];
    std::shared_ptr<SharedMulti> chosen;
    for (auto it = multis.begin(); it != multis.end();) {
      auto multi = it->lock();
      if (!multi) {
        it = multis.erase(it);
        continue;
      }
      if (!chosen && multi->clients_ < kClientsPerMulti) chosen = multi;
      ++it;
    }
    if (!chosen) {
      chosen = std::shared_ptr<SharedMulti>(new SharedMulti(loop));
      multis.push_back(chosen);
    }
    chosen->Count(1);
    return chosen;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(Mutex());
    Count(-1);
  }
  ~SharedMulti() {
    curl_multi_cleanup(multi_);  // closes the cached connections (socket callback: REMOVE)
    sockets_.clear();
  }
  SharedMulti(const SharedMulti&) = delete;
  SharedMulti& operator=(const SharedMulti&) = delete;

  CURLM* multi() const { return multi_; }

 private:
  explicit SharedMulti(EventLoop& loop) : loop_(loop), curl_timer_(loop) {
    InitCurlOnce();
    multi_ = curl_multi_init();
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &SharedMulti::OnSocket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &SharedMulti::OnTimer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  }
  static int OnSocket(CURL*, curl_socket_t fd, int what, void* userp, void*);
  static int OnTimer(CURLM*, long timeout_ms, void* userp);
  friend struct LoopHttpClient::Impl;  // sets CloseSocket on each of its requests
  static int CloseSocket(void* userp, curl_socket_t fd);
  void Act(curl_socket_t fd, int events);
  static std::mutex& Mutex() {
    static std::mutex mu;
    return mu;
  }
  static std::map<EventLoop*, std::vector<std::weak_ptr<SharedMulti>>>& Multis() {
    static std::map<EventLoop*, std::vector<std::weak_ptr<SharedMulti>>> multis;
    return multis;
  }
  // The cache keeps one idle connection per client, as each client kept its own before.
  void Count(int delta) {
    clients_ += delta;
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(std::max(4L, clients_)));
  }

  EventLoop& loop_;
  CURLM* multi_ = nullptr;
  LoopTimer curl_timer_;  // libcurl's own timeouts (CURLMOPT_TIMERFUNCTION)
  // One watch per socket libcurl opened, kept (stopped) while its connection idles in the
  // cache and dropped when libcurl closes the socket: a request on a kept-alive connection
  // makes no watch of its own (uv_poll_init and uv_close cost four system calls each time).
  std::map<curl_socket_t, std::unique_ptr<SocketWatch>> sockets_;
  long clients_ = 0;
};

struct LoopHttpClient::Impl {
  explicit Impl(EventLoop& event_loop)
      : loop(event_loop), shared(SharedMulti::Get(event_loop)), deadline_timer(event_loop) {
    multi = shared->multi();
  }
  ~Impl() {
    Detach();
    if (easy != nullptr) curl_easy_cleanup(easy);
    shared->Release();
    *alive = false;
  }

  static size_t OnHeader(char* data, size_t size, size_t count, void* userp);
  static size_t OnBody(char* data, size_t size, size_t count, void* userp);

  void Start(const HttpRequest& request, SteadyClock::time_point deadline, Done on_done);
  void ArmIdle();
  void Configure(const HttpRequest& request);
  void Completed(CURLcode code);
  void Finish(HttpResult result);
  void Detach();
  ProbeFailure FailureOf(CURLcode code) const;
  void FailSoon(ProbeFailure failure, Done on_done);

  EventLoop& loop;
  std::shared_ptr<SharedMulti> shared;
  CURLM* multi = nullptr;    // shared's
  LoopTimer deadline_timer;  // the request's deadline, whatever libcurl does
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  // The client's one easy handle, reset for each request: a new one per request cost a
  // calloc of the handle and of its 16 KB receive buffer, and their release.
  CURL* easy = nullptr;
  // The request in flight:
  bool in_flight = false;
  curl_slist* header_list = nullptr;
  Done done;
  HttpBounds bounds;
  std::string what;  // "GET /metrics"
  long timeout_ms = 0;
  size_t header_count = 0;
  bool status_seen = false;  // a complete status line came
  bool headers_done = false;
  std::string breach;  // the bound a callback broke, said in the failure
  HttpAnswer answer;
  char error[CURL_ERROR_SIZE] = {};
  // How far an answer cut off by the deadline got: the bound it broke, for the failure.
  std::string Phase() const {
    curl_off_t connected_us = 0;
    if (in_flight) curl_easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &connected_us);
    if (connected_us == 0) return "no connection made";
    if (!status_seen) return "no complete status line";
    if (!headers_done) return "the headers not complete";
    return "the body not complete";
  }
  // Streaming mode (StartStream) when `stream` is set: the body goes to it, bounded by `idle`.
  LoopHttpClient::Chunk stream;
  std::chrono::milliseconds idle{0};
};

int SharedMulti::OnSocket(CURL*, curl_socket_t fd, int what, void* userp, void*) {
  auto* self = static_cast<SharedMulti*>(userp);
  if (what == CURL_POLL_REMOVE) {  // idle, or about to be closed (CloseSocket drops it)
    const auto it = self->sockets_.find(fd);
    if (it != self->sockets_.end()) it->second->Watch(false, false, nullptr);
    return 0;
  }
  auto& watch = self->sockets_[fd];
  if (!watch) watch = std::make_unique<SocketWatch>(self->loop_, fd);
  const bool read = (what & CURL_POLL_IN) != 0;
  const bool write = (what & CURL_POLL_OUT) != 0;
  // Told which events came, libcurl reads and writes without polling the socket first.
  return watch->WatchEvents(read, write,
                            [self, fd](SocketWatch::Events events) {
                              self->Act(fd, (events.readable ? CURL_CSELECT_IN : 0) |
                                                (events.writable ? CURL_CSELECT_OUT : 0) |
                                                (events.error ? CURL_CSELECT_ERR : 0));
                            })
             ? 0
             : -1;
}

int SharedMulti::CloseSocket(void* userp, curl_socket_t fd) {
  // The watch goes first: libuv must not poll a closed descriptor, nor one reused by another.
  static_cast<SharedMulti*>(userp)->sockets_.erase(fd);
  return close(fd);
}

int SharedMulti::OnTimer(CURLM*, long timeout_ms, void* userp) {
  auto* self = static_cast<SharedMulti*>(userp);
  if (timeout_ms < 0) {
    self->curl_timer_.Stop();
    return 0;
  }
  // Fired from the loop, never from inside libcurl (it must not be re-entered here).
  self->curl_timer_.Arm(SteadyClock::now() + std::chrono::milliseconds(timeout_ms),
                        [self] { self->Act(CURL_SOCKET_TIMEOUT, 0); });
  return 0;
}

void SharedMulti::Act(curl_socket_t fd, int events) {
  // A client told of its answer may drop the last reference to this multi: hold one.
  const std::shared_ptr<SharedMulti> keep = shared_from_this();
  int running = 0;
  curl_multi_socket_action(multi_, fd, events, &running);
  int left = 0;
  while (CURLMsg* message = curl_multi_info_read(multi_, &left)) {
    if (message->msg != CURLMSG_DONE) continue;
    char* client = nullptr;
    curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &client);
    // Completed() removes the easy handle, which drops any message of it still queued.
    if (client != nullptr) {
      reinterpret_cast<LoopHttpClient::Impl*>(client)->Completed(message->data.result);
    }
  }
}

size_t LoopHttpClient::Impl::OnHeader(char* data, size_t size, size_t count, void* userp) {
  auto* impl = static_cast<Impl*>(userp);
  const size_t length = size * count;
  const std::string_view line(data, length);
  const HttpBounds& bounds = impl->bounds;
  if (line.rfind("HTTP/", 0) == 0) {  // a status line (a 1xx answer's too)
    if (length > bounds.max_status_line_bytes) {
      impl->breach =
          "status line longer than " + std::to_string(bounds.max_status_line_bytes) + " bytes";
      return 0;
    }
    impl->status_seen = true;
    return length;
  }
  if (line == "\r\n" || line == "\n") {  // the end of the headers
    impl->headers_done = true;
    if (impl->stream) impl->ArmIdle();  // the headers' deadline is met: now the idle bound
    return length;
  }
  if (length > bounds.max_header_line_bytes) {
    impl->breach =
        "a header line longer than " + std::to_string(bounds.max_header_line_bytes) + " bytes";
    return 0;
  }
  if (++impl->header_count > bounds.max_headers) {
    impl->breach = "more than " + std::to_string(bounds.max_headers) + " headers";
    return 0;
  }
  constexpr std::string_view kDate = "date:";
  if (line.size() > kDate.size() && strncasecmp(line.data(), kDate.data(), kDate.size()) == 0) {
    const auto value = line.substr(kDate.size());
    const auto start = value.find_first_not_of(" \t");
    const auto end = value.find_last_not_of(" \t\r\n");
    impl->answer.date.clear();
    if (start != std::string_view::npos) impl->answer.date = value.substr(start, end - start + 1);
  }
  return length;
}

size_t LoopHttpClient::Impl::OnBody(char* data, size_t size, size_t count, void* userp) {
  auto* impl = static_cast<Impl*>(userp);
  const size_t length = size * count;
  if (impl->stream) {
    long status = 0;
    curl_easy_getinfo(impl->easy, CURLINFO_RESPONSE_CODE, &status);
    impl->breach = status / 100 == 2 ? impl->stream(std::string_view(data, length))
                                     : "status " + std::to_string(status);
    if (!impl->breach.empty()) return 0;  // CURLE_WRITE_ERROR
    impl->ArmIdle();
    return length;
  }
  if (impl->answer.body.size() + length > impl->bounds.max_body_bytes) {
    impl->breach = "answer larger than " + std::to_string(impl->bounds.max_body_bytes) + " bytes";
    return 0;  // CURLE_WRITE_ERROR
  }
  impl->answer.body.append(data, length);
  return length;
}

void LoopHttpClient::Impl::Configure(const HttpRequest& request) {
  curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(easy, CURLOPT_PRIVATE, reinterpret_cast<char*>(this));
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_PROXY, "");  // no proxy from the environment
  curl_easy_setopt(easy, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  // A stream has no whole deadline: the headers' one and the idle bound are our timers'.
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, stream ? 0L : timeout_ms);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  if (!stream) {
    curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE,
                     static_cast<curl_off_t>(request.bounds.max_body_bytes));
  }
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &Impl::OnHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, this);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Impl::OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, this);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, &SharedMulti::CloseSocket);
  curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, shared.get());
  header_list = curl_slist_append(header_list, "Expect:");  // no 100-continue round trip
  for (const auto& header : request.headers) {
    header_list = curl_slist_append(header_list, header.c_str());
  }
  if (!request.post_body.empty()) {
    header_list = curl_slist_append(header_list, "Content-Type: application/json");
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(request.post_body.size()));
    curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, request.post_body.c_str());
  }
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, header_list);
  const HttpCredentials& tls = request.credentials;
  if (!tls.ca_file.empty()) {
    curl_easy_setopt(easy, CURLOPT_CAINFO, tls.ca_file.c_str());
  } else if (!tls.ca_pem.empty()) {
    curl_blob blob{const_cast<char*>(tls.ca_pem.data()), tls.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(easy, CURLOPT_CAINFO_BLOB, &blob);
  }
  if (!tls.cert_file.empty()) curl_easy_setopt(easy, CURLOPT_SSLCERT, tls.cert_file.c_str());
  if (!tls.key_file.empty()) curl_easy_setopt(easy, CURLOPT_SSLKEY, tls.key_file.c_str());
  if (!tls.bearer_token.empty()) {
    curl_easy_setopt(easy, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
    curl_easy_setopt(easy, CURLOPT_XOAUTH2_BEARER, tls.bearer_token.c_str());
  } else if (!tls.basic_user.empty()) {
    curl_easy_setopt(easy, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(easy, CURLOPT_USERNAME, tls.basic_user.c_str());
    curl_easy_setopt(easy, CURLOPT_PASSWORD, tls.basic_password.c_str());
  }
}

void LoopHttpClient::Impl::FailSoon(ProbeFailure failure, Done on_done) {
  // Posted, so that done never runs inside Start().
  loop.Post([alive = std::weak_ptr<bool>(alive), failure = std::move(failure),
             on_done = std::move(on_done)]() mutable {
    if (alive.lock()) on_done(std::move(failure));
  });
}

void LoopHttpClient::Impl::Start(const HttpRequest& request, SteadyClock::time_point deadline,
                                 Done on_done) {
  what = RequestName(request);
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
  if (in_flight) {
    return FailSoon({ProbeFailureReason::kInternal, what + ": a request is already in flight"},
                    std::move(on_done));
  }
  if (left.count() <= 0) {
    return FailSoon({ProbeFailureReason::kTimeout, what + ": no time left"}, std::move(on_done));
  }
  if (request.url.rfind("http://", 0) != 0 && request.url.rfind("https://", 0) != 0) {
    return FailSoon({ProbeFailureReason::kConfig, "the URL's scheme is neither http nor https"},
                    std::move(on_done));
  }
  if (easy == nullptr) {
    easy = curl_easy_init();
  } else {
    curl_easy_reset(easy);  // every option back to its default; connections and caches stay
  }
  if (easy == nullptr) {
    return FailSoon({ProbeFailureReason::kInternal, what + ": libcurl could not start"},
                    std::move(on_done));
  }
  done = std::move(on_done);
  bounds = request.bounds;
  timeout_ms = static_cast<long>(left.count());
  header_count = 0;
  status_seen = false;
  headers_done = false;
  breach.clear();
  error[0] = '\0';
  answer = HttpAnswer{};
  Configure(request);
  answer.sent = SteadyClock::now();
  deadline_timer.Arm(deadline, [this] {
    const std::string limit = std::to_string(timeout_ms) + " ms";
    Finish(ProbeFailure{
        ProbeFailureReason::kTimeout,
        what + (stream ? ": no status and headers within the deadline of " + limit
                       : ": the answer outlasted the deadline of " + limit + ": " + Phase())});
  });
  in_flight = true;
  if (curl_multi_add_handle(multi, easy) != CURLM_OK) {
    in_flight = false;
    curl_slist_free_all(header_list);
    header_list = nullptr;
    deadline_timer.Stop();
    return FailSoon({ProbeFailureReason::kInternal, what + ": libcurl refused the request"},
                    std::move(done));
  }
}

void LoopHttpClient::Impl::ArmIdle() {
  // Re-armed at every chunk; fired from the loop, never from inside libcurl.
  deadline_timer.Arm(SteadyClock::now() + idle, [this] {
    Finish(ProbeFailure{
        ProbeFailureReason::kTimeout,
        what + ": no bytes for " + std::to_string(idle.count()) + " ms (the stream's idle bound)"});
  });
}

void LoopHttpClient::Impl::Completed(CURLcode code) {
  if (!in_flight) return;
  if (code != CURLE_OK) {
    Finish(FailureOf(code));
    return;
  }
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &answer.status);
  Finish(std::move(answer));
}

ProbeFailure LoopHttpClient::Impl::FailureOf(CURLcode code) const {
  if (!breach.empty()) return {ProbeFailureReason::kProtocol, what + ": " + breach};
  if (code == CURLE_FILESIZE_EXCEEDED) {
    return {ProbeFailureReason::kProtocol,
            what + ": answer larger than " + std::to_string(bounds.max_body_bytes) + " bytes"};
  }
  if (code == CURLE_OUT_OF_MEMORY && !headers_done) {
    // libcurl buffers a header line until its end, up to CURL_MAX_HTTP_HEADER, then gives up.
    return {ProbeFailureReason::kProtocol, what + ": a header line longer than " +
                                               std::to_string(CURL_MAX_HTTP_HEADER) +
                                               " bytes (libcurl's cap)"};
  }
  if (code == CURLE_OPERATION_TIMEDOUT) {  // libcurl's own copy of the deadline, said alike
    return {ProbeFailureReason::kTimeout, what + ": the answer outlasted the deadline of " +
                                              std::to_string(timeout_ms) + " ms: " + Phase()};
  }
  // libcurl's message names the host and the problem, never the credentials.
  const std::string detail = error[0] != '\0' ? error : curl_easy_strerror(code);
  return {ReasonOf(code), what + ": " + detail};
}

void LoopHttpClient::Impl::Detach() {
  if (in_flight) {
    curl_multi_remove_handle(multi, easy);
    in_flight = false;
  }
  curl_slist_free_all(header_list);
  header_list = nullptr;
}

void LoopHttpClient::Impl::Finish(HttpResult result) {
  if (!in_flight) return;
  deadline_timer.Stop();
  Detach();  // a finished transfer leaves its connection in the cache; a cut one closes it
  Done on_done = std::move(done);
  done = nullptr;
  if (on_done) on_done(std::move(result));
}

LoopHttpClient::LoopHttpClient(EventLoop& loop) : impl_(std::make_unique<Impl>(loop)) {}

LoopHttpClient::~LoopHttpClient() = default;

void LoopHttpClient::Start(const HttpRequest& request, SteadyClock::time_point deadline,
                           Done done) {
  if (!impl_->in_flight) impl_->stream = nullptr;
  impl_->Start(request, deadline, std::move(done));
}

void LoopHttpClient::StartStream(const HttpRequest& request,
                                 SteadyClock::time_point headers_deadline,
                                 std::chrono::milliseconds idle, Chunk chunk, Done done) {
  if (!impl_->in_flight) {  // else Start refuses it, and the one in flight keeps its own
    impl_->stream = std::move(chunk);
    impl_->idle = idle;
  }
  impl_->Start(request, headers_deadline, std::move(done));
}

bool LoopHttpClient::busy() const { return impl_->in_flight; }

struct BlockingHttpCall::State {
  std::mutex mu;
  std::condition_variable changed;
  std::optional<HttpResult> result;        // guarded by mu
  bool canceled = false;                   // guarded by mu
  std::unique_ptr<LoopHttpClient> client;  // the loop thread's only
};

BlockingHttpCall::BlockingHttpCall(EventLoop& loop, HttpRequest request,
                                   SteadyClock::time_point deadline,
                                   std::chrono::milliseconds grace)
    : loop_(loop), state_(std::make_shared<State>()), give_up_(deadline + grace), grace_(grace) {
  if (loop.OnLoopThread()) {
    state_->result = ProbeFailure{ProbeFailureReason::kInternal,
                                  "internal: a blocking request on the event loop's own thread"};
    return;
  }
  loop.Post([&loop, state = state_, request = std::move(request), deadline] {
    state->client = std::make_unique<LoopHttpClient>(loop);
    // Weak: the state owns the client, so a strong hold here would be a cycle that only the
    // destructor's posted drop breaks (and a loop destroyed first would leak it).
    state->client->Start(request, deadline, [weak = std::weak_ptr<State>(state)](HttpResult r) {
      const std::shared_ptr<State> held = weak.lock();
      if (held == nullptr) return;
      std::lock_guard<std::mutex> lock(held->mu);
      held->result = std::move(r);
      held->changed.notify_all();
    });
  });
}

BlockingHttpCall::~BlockingHttpCall() {
  // The client goes on the loop thread. Waited for (up to the grace), so that a loop
  // destroyed next has nothing of ours left to drop.
  auto dropped = std::make_shared<std::promise<void>>();
  std::future<void> gone = dropped->get_future();
  loop_.Post([state = state_, dropped] {
    state->client.reset();
    dropped->set_value();
  });
  if (!loop_.OnLoopThread()) gone.wait_for(grace_);
}

HttpResult BlockingHttpCall::Wait() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->changed.wait_until(lock, give_up_,
                             [&] { return state_->result.has_value() || state_->canceled; });
  if (state_->result) return *state_->result;
  return ProbeFailure{ProbeFailureReason::kInternal,
                      state_->canceled ? "the request was canceled"
                                       : "no answer from the event loop by the deadline"};
}

void BlockingHttpCall::Cancel() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->canceled = true;
  state_->changed.notify_all();
}

}  // namespace sbd
