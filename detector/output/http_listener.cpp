#include "detector/output/http_listener.h"

#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <optional>

#include "detector/common/internal_errors.h"

namespace sbd {

using Clock = std::chrono::steady_clock;

struct BoundedServer::Connection {
  int fd = -1;
  SSL* ssl = nullptr;
  bool handshaken = false;
  short events = POLLIN;
  /// What the gatherer read: the head, and the body when it gathered one (see `gathered`).
  std::string head;
  /// Bytes of head and body to gather before the request is complete; 0 while the head is
  /// incomplete or when the body is left to the worker.
  size_t complete_at = 0;
  bool gathered = false;  ///< `head` holds the whole request, body included
  Clock::time_point head_deadline;
  Clock::time_point hard_deadline;
  /// The answer, written by the worker into memory and sent by the gatherer.
  std::string out;
  size_t sent = 0;

  ~Connection() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) close(fd);
  }
};

namespace {

enum class Step { kWaiting, kComplete, kTooLarge, kDrop };

int MillisUntil(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count() + 1, 60000));
}

// Waits until `fd` is ready for `events`, or the deadline passes.
bool Wait(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ready = poll(&p, 1, MillisUntil(deadline));
    if (ready > 0) return (p.revents & (POLLERR | POLLNVAL)) == 0;
    if (ready == 0 || errno != EINTR) return false;
  }
}

// An SSL result that means "not yet": which poll event to wait for; 0 for a real failure.
short SslWants(SSL* ssl, int result) {
  switch (SSL_get_error(ssl, result)) {
    case SSL_ERROR_WANT_READ:
      return POLLIN;
    case SSL_ERROR_WANT_WRITE:
      return POLLOUT;
    default:
      return 0;
  }
}

bool WouldBlock() { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }

bool HeaderIs(const std::string& line, const char* name) {
  const size_t n = std::strlen(name);
  return line.size() > n && line[n] == ':' && strncasecmp(line.data(), name, n) == 0;
}

// Once the head is complete: how many bytes the whole request takes when the gatherer should
// read the body too (a Content-Length within the limit, no Expect or Transfer-Encoding), else
// the head's own length (the worker's screening refuses or handles the rest).
size_t RequestBytes(const std::string& head, size_t max_body_bytes) {
  const size_t head_end = head.find("\r\n\r\n") + 4;
  std::optional<size_t> length;
  for (size_t at = head.find("\r\n") + 2; at < head_end - 2;) {
    const size_t end = head.find("\r\n", at);
    const std::string line = head.substr(at, end - at);
    at = end + 2;
    if (HeaderIs(line, "Expect") || HeaderIs(line, "Transfer-Encoding")) return head_end;
    if (!HeaderIs(line, "Content-Length")) continue;
    if (length) return head_end;  // twice: for the screening to refuse
    const std::string value = line.substr(line.find(':') + 1);
    const size_t first = value.find_first_not_of(' ');
    const size_t last = value.find_last_not_of(' ');
    const std::string digits =
        first == std::string::npos ? "" : value.substr(first, last - first + 1);
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      return head_end;
    }
    length = std::stoul(digits);
    if (*length > max_body_bytes) return head_end;
  }
  return head_end + length.value_or(0);
}

// Reads what is there, non-blocking, until the head (and the body it announces, see
// RequestBytes) is complete or the limit is reached.
Step Advance(BoundedServer::Connection& c, const ListenerLimits& limits) {
  const size_t max_head_bytes = limits.max_head_bytes;
  if (c.ssl != nullptr && !c.handshaken) {
    ERR_clear_error();
    const int result = SSL_do_handshake(c.ssl);
    if (result != 1) {
      c.events = SslWants(c.ssl, result);
      return c.events != 0 ? Step::kWaiting : Step::kDrop;
    }
    c.handshaken = true;
  }
  char buffer[4096];
  for (;;) {
    if (c.complete_at == 0 && c.head.find("\r\n\r\n") != std::string::npos) {
      c.complete_at = RequestBytes(c.head, limits.max_body_bytes);
      c.gathered = c.complete_at > c.head.find("\r\n\r\n") + 4;
      if (c.gathered) {
        c.head_deadline = std::min(Clock::now() + limits.body_deadline, c.hard_deadline);
      }
    }
    if (c.complete_at != 0 && (!c.gathered || c.head.size() >= c.complete_at)) {
      if (c.gathered) c.head.resize(c.complete_at);
      return Step::kComplete;
    }
    const size_t limit = c.complete_at != 0 ? c.complete_at : max_head_bytes;
    if (c.head.size() >= limit) return Step::kTooLarge;
    const size_t want = std::min(sizeof(buffer), limit - c.head.size());
    ssize_t n = 0;
    if (c.ssl != nullptr) {
      ERR_clear_error();
      const int result = SSL_read(c.ssl, buffer, static_cast<int>(want));
      if (result <= 0) {
        c.events = SslWants(c.ssl, result);
        return c.events != 0 ? Step::kWaiting : Step::kDrop;
      }
      n = result;
    } else {
      n = recv(c.fd, buffer, want, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && !WouldBlock())) return Step::kDrop;
      if (n < 0) {
        c.events = POLLIN;
        return Step::kWaiting;
      }
    }
    c.head.append(buffer, static_cast<size_t>(n));
  }
}

// Best effort: the client may still be sending, and will then see a reset instead.
void Refuse(BoundedServer::Connection& c, const std::string& status) {
  const std::string answer =
      "HTTP/1.1 " + status + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  if (c.ssl != nullptr) {
    SSL_write(c.ssl, answer.data(), static_cast<int>(answer.size()));
  } else {
    [[maybe_unused]] auto sent =
        send(c.fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
}

void Address(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t size = sizeof(address);
  const int got = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size)
                       : getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  char host[NI_MAXHOST] = {};
  char service[NI_MAXSERV] = {};
  if (got != 0 || getnameinfo(reinterpret_cast<sockaddr*>(&address), size, host, sizeof(host),
                              service, sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return;
  }
  ip = host;
  port = std::atoi(service);
}

// One request's reads and writes on a non-blocking connection, each bounded by a deadline.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(BoundedServer::Connection& c, const ListenerLimits& limits)
      : c_(c),
        limits_(limits),
        read_deadline_(std::min(Clock::now() + limits.body_deadline, c.hard_deadline)),
        body_left_(limits.max_body_bytes) {}

  bool is_readable() const override {
    return offset_ < c_.head.size() || (c_.ssl != nullptr && SSL_pending(c_.ssl) > 0) ||
           Wait(c_.fd, POLLIN, read_deadline_);
  }
  // Into memory: the gatherer sends it (see SendSome), so a slow reader holds no worker.
  bool is_writable() const override { return true; }

  ssize_t read(char* ptr, size_t size) override {
    if (offset_ < c_.head.size()) {
      const size_t n = std::min(size, c_.head.size() - offset_);
      std::memcpy(ptr, c_.head.data() + offset_, n);
      offset_ += n;
      return static_cast<ssize_t>(n);
    }
    if (no_body_) return 0;
    if (body_left_ == 0) return -1;
    size = std::min(size, body_left_);
    for (;;) {
      short wants = POLLIN;
      if (c_.ssl != nullptr) {
        ERR_clear_error();
        const int result = SSL_read(c_.ssl, ptr, static_cast<int>(std::min<size_t>(size, 1 << 20)));
        if (result > 0) return Took(result);
        if (SSL_get_error(c_.ssl, result) == SSL_ERROR_ZERO_RETURN) return 0;
        wants = SslWants(c_.ssl, result);
        if (wants == 0) return -1;
      } else {
        const ssize_t n = recv(c_.fd, ptr, size, MSG_DONTWAIT);
        if (n >= 0) return Took(n);
        if (!WouldBlock()) return -1;
      }
      if (!Wait(c_.fd, wants, read_deadline_)) return -1;
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (c_.out.size() + size > limits_.max_unsent_bytes) return -1;
    c_.out.append(ptr, size);
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(c_.fd, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(c_.fd, false, ip, port);
  }
  socket_t socket() const override { return c_.fd; }

  /// A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112 6.3):
  /// reads past the head end at once instead of waiting for a close that never comes.
  void EndAfterHead() {
    const auto end = c_.head.find("\r\n\r\n");
    if (end != std::string::npos) c_.head.resize(end + 4);
    EndAfterBuffer();
  }
  /// The gatherer read the whole request: nothing is read from the socket.
  void EndAfterBuffer() {
    body_left_ = 0;
    no_body_ = true;
  }

 private:
  ssize_t Took(ssize_t n) {
    body_left_ -= std::min(body_left_, static_cast<size_t>(n));
    return n;
  }
  BoundedServer::Connection& c_;
  const ListenerLimits& limits_;
  const Clock::time_point read_deadline_;
  size_t offset_ = 0;
  size_t body_left_;
  bool no_body_ = false;
};

enum class Sent { kMore, kDone, kDrop };

// Sends what the socket takes now of the answer, non-blocking; kMore leaves c.events set.
Sent SendSome(BoundedServer::Connection& c) {
  while (c.sent < c.out.size()) {
    const size_t size = std::min<size_t>(c.out.size() - c.sent, 1 << 20);
    if (c.ssl != nullptr) {
      ERR_clear_error();
      const int result = SSL_write(c.ssl, c.out.data() + c.sent, static_cast<int>(size));
      if (result <= 0) {
        c.events = SslWants(c.ssl, result);
        return c.events != 0 ? Sent::kMore : Sent::kDrop;
      }
      c.sent += static_cast<size_t>(result);
    } else {
      const ssize_t n = send(c.fd, c.out.data() + c.sent, size, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && WouldBlock()) {
        c.events = POLLOUT;
        return Sent::kMore;
      }
      if (n < 0) return Sent::kDrop;
      c.sent += static_cast<size_t>(n);
    }
  }
  if (c.ssl != nullptr) {
    SSL_shutdown(c.ssl);
  } else {
    shutdown(c.fd, SHUT_WR);
  }
  return Sent::kDone;
}

}  // namespace

BoundedServer::BoundedServer(ListenerLimits limits, SSL_CTX* tls)
    : limits_(limits), tls_(tls), wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  // A client that goes away mid-answer must cost an error, not the process (SSL writes with
  // write(2), which has no MSG_NOSIGNAL).
  std::signal(SIGPIPE, SIG_IGN);
}

BoundedServer::~BoundedServer() {
  Shutdown();
  const socket_t listener = svr_sock_.exchange(INVALID_SOCKET);
  if (listener != INVALID_SOCKET) close(listener);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (tls_ != nullptr) SSL_CTX_free(tls_);
}

void BoundedServer::Serve() {
  const socket_t listener = svr_sock_;
  if (listener == INVALID_SOCKET) return;
  // httplib listens with a backlog of 5; the gatherer drains it quickly, but a burst of
  // connections deserves more room.
  ::listen(listener, 128);
  // The gatherer accepts until there is nothing left; a blocking accept would stall it.
  fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK);
  for (size_t i = 0; i < limits_.workers; ++i) workers_.emplace_back([this] { Work(); });
  Gather();
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue_.clear();
  }
  queue_cv_.notify_all();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
  std::lock_guard<std::mutex> lock(queue_mu_);
  answered_.clear();
}

bool BoundedServer::SetTls(SSL_CTX* tls) {
  std::lock_guard<std::mutex> lock(tls_mu_);
  if ((tls_ == nullptr) != (tls == nullptr)) {
    if (tls != nullptr) SSL_CTX_free(tls);
    return false;
  }
  // Connections already accepted hold their own reference to the old context.
  if (tls_ != nullptr) SSL_CTX_free(tls_);
  tls_ = tls;
  return true;
}

void BoundedServer::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  const uint64_t one = 1;
  if (wake_fd_ >= 0) {
    [[maybe_unused]] auto written = ::write(wake_fd_, &one, sizeof(one));
  }
}

bool BoundedServer::Enqueue(std::unique_ptr<Connection>& connection) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (stopping_ || queue_.size() >= limits_.max_queued) return false;
    queue_.push_back(std::move(connection));
  }
  queue_cv_.notify_one();
  return true;
}

void BoundedServer::Answered(std::unique_ptr<Connection> connection) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (stopping_) return;
    answered_.push_back(std::move(connection));
  }
  const uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(wake_fd_, &one, sizeof(one));
}

namespace {

// Takes the connections the workers answered into `sending`, oldest first, keeping the bytes
// still to send under `max_bytes` by dropping the oldest.
void TakeAnswered(std::vector<std::unique_ptr<BoundedServer::Connection>>& answered,
                  std::vector<std::unique_ptr<BoundedServer::Connection>>& sending,
                  size_t max_bytes) {
  for (auto& c : answered) {
    c->events = POLLOUT;
    sending.push_back(std::move(c));
  }
  answered.clear();
  size_t unsent = 0;
  for (const auto& c : sending) unsent += c->out.size() - c->sent;
  auto oldest = sending.begin();
  while (unsent > max_bytes && oldest != sending.end()) {
    unsent -= (*oldest)->out.size() - (*oldest)->sent;
    oldest->reset();
    ++oldest;
  }
  sending.erase(std::remove(sending.begin(), sending.end(), nullptr), sending.end());
}

}  // namespace

void BoundedServer::Gather() {
  const socket_t listener = svr_sock_;
  std::vector<std::unique_ptr<Connection>> pending;  // oldest first
  std::vector<std::unique_ptr<Connection>> sending;  // answers being sent, oldest first
  std::vector<std::unique_ptr<Connection>> answered;
  std::vector<pollfd> fds;
  while (!stopping_) {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      answered.swap(answered_);
    }
    TakeAnswered(answered, sending, limits_.max_unsent_bytes);
    const auto now = Clock::now();
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [&](const auto& c) { return c->head_deadline <= now; }),
                  pending.end());
    sending.erase(std::remove_if(sending.begin(), sending.end(),
                                 [&](const auto& c) { return c->hard_deadline <= now; }),
                  sending.end());
    int timeout = 1000;
    fds.assign({{listener, POLLIN, 0}, {wake_fd_, POLLIN, 0}});
    for (const auto& c : pending) {
      fds.push_back({c->fd, c->events, 0});
      timeout = std::min(timeout, MillisUntil(c->head_deadline));
    }
    for (const auto& c : sending) {
      fds.push_back({c->fd, c->events, 0});
      timeout = std::min(timeout, MillisUntil(c->hard_deadline));
    }
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      spdlog::error("msg=\"http listener poll failed\" error=\"{}\"", std::strerror(errno));
      return;
    }
    if (fds[1].revents & POLLIN) {
      uint64_t count = 0;
      [[maybe_unused]] auto got = ::read(wake_fd_, &count, sizeof(count));
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      if (fds[i + 2].revents == 0) continue;
      const Step step = Advance(*pending[i], limits_);
      if (step == Step::kWaiting) continue;
      if (step == Step::kTooLarge) Refuse(*pending[i], "431 Request Header Fields Too Large");
      if (step == Step::kComplete && !Enqueue(pending[i])) {
        Refuse(*pending[i], "503 Service Unavailable");
      }
      pending[i].reset();
    }
    for (size_t i = 0; i < sending.size(); ++i) {
      if (fds[i + 2 + pending.size()].revents == 0) continue;
      if (SendSome(*sending[i]) != Sent::kMore) sending[i].reset();
    }
    pending.erase(std::remove(pending.begin(), pending.end(), nullptr), pending.end());
    sending.erase(std::remove(sending.begin(), sending.end(), nullptr), sending.end());
    if ((fds[0].revents & POLLIN) == 0) continue;
    Accept(listener, pending);
  }
}

void BoundedServer::Accept(socket_t listener, std::vector<std::unique_ptr<Connection>>& pending) {
  for (int accepted = 0; accepted < 64; ++accepted) {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: the oldest pending head gives one back rather than spinning.
      if ((errno == EMFILE || errno == ENFILE) && !pending.empty()) pending.erase(pending.begin());
      break;
    }
    if (pending.size() >= limits_.max_pending) pending.erase(pending.begin());
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->head_deadline = Clock::now() + limits_.head_deadline;
    c->hard_deadline = Clock::now() + limits_.connection_deadline;
    if (tls_ != nullptr) {
      std::lock_guard<std::mutex> lock(tls_mu_);
      c->ssl = SSL_new(tls_);
      if (c->ssl == nullptr || SSL_set_fd(c->ssl, fd) != 1) continue;
      SSL_set_accept_state(c->ssl);
    }
    pending.push_back(std::move(c));
  }
}

void BoundedServer::Work() {
  for (;;) {
    std::unique_ptr<Connection> connection;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      connection = std::move(queue_.front());
      queue_.pop_front();
    }
    Guarded("http request", [&] { Handle(*connection); });
    Answered(std::move(connection));
  }
}

void BoundedServer::Handle(Connection& connection) {
  ConnectionStream stream(connection, limits_);
  bool closed = false;
  // One request per connection: a keep-alive connection would hold a worker while idle.
  process_request(stream, /*close_connection=*/true, closed, [&](httplib::Request& req) {
    req.ssl = connection.ssl;
    // The source, for the authentication's per-source shedding.
    if (req.remote_addr.empty()) stream.get_remote_ip_and_port(req.remote_addr, req.remote_port);
    if (connection.gathered) {
      stream.EndAfterBuffer();
    } else if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
      stream.EndAfterHead();
    }
  });
}

}  // namespace sbd
