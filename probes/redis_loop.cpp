#include "probes/redis_loop.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "probes/redis_tls.h"
#include "probes/redis_wire.h"

namespace sbd {
namespace {

// The addresses found, each a sockaddr's bytes; `found` freed.
std::vector<std::string> AddressesOf(struct addrinfo* found) {
  std::vector<std::string> addresses;
  for (const struct addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    addresses.emplace_back(reinterpret_cast<const char*>(ai->ai_addr), ai->ai_addrlen);
  }
  if (found != nullptr) ::freeaddrinfo(found);
  return addresses;
}

// A resolution on libuv's resolver threads (a name, not an address literal): owned by libuv
// until its callback, which finds the connection (if still there) by a weak pointer.
struct Resolution {
  uv_getaddrinfo_t request{};
  std::weak_ptr<LoopRedisConnection> connection;
  std::function<void(int, std::vector<std::string>)> deliver;
};

// True when no reply is half read. A reader asked for a reply with every byte taken already
// sets up its first task (ridx 0, type -1) and waits: that is no reply begun either.
bool NoReplyBegun(const redisReader& reader) {
  return reader.ridx == -1 || (reader.ridx == 0 && reader.rstack[0].type == -1);
}

}  // namespace

void RedisReplyDeleter::operator()(redisReply* reply) const { freeReplyObject(reply); }

std::vector<RedisValue> RedisValuesOf(const std::vector<RedisReplyPtr>& replies) {
  std::vector<RedisValue> values;
  values.reserve(replies.size());
  for (const auto& reply : replies) values.push_back(RedisValueOf(*reply));
  return values;
}

std::shared_ptr<LoopRedisConnection> LoopRedisConnection::Create(
    EventLoop& loop, std::string address, std::string username, std::optional<std::string> password,
    std::optional<RedisTlsSpec> tls) {
  return std::shared_ptr<LoopRedisConnection>(new LoopRedisConnection(
      loop, std::move(address), std::move(username), std::move(password), std::move(tls)));
}

LoopRedisConnection::LoopRedisConnection(EventLoop& loop, std::string address, std::string username,
                                         std::optional<std::string> password,
                                         std::optional<RedisTlsSpec> tls)
    : loop_(loop),
      address_(std::move(address)),
      username_(std::move(username)),
      password_(std::move(password)),
      tls_(std::move(tls)),
      timer_(loop) {}

LoopRedisConnection::~LoopRedisConnection() { Drop(); }

bool LoopRedisConnection::connected() const { return phase_ == Phase::kReady && !in_call_; }

void LoopRedisConnection::Close() {
  Drop();
  ++call_;
  in_call_ = false;
  authenticating_ = false;
  connect_done_ = nullptr;
  pipeline_done_ = nullptr;
  streaming_ = false;
  push_ = nullptr;
  ended_ = nullptr;
  reply_begun_ = false;
}

void LoopRedisConnection::Drop() {
  timer_.Stop();
  watch_.reset();  // the poll handle goes before its socket
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  if (fd_ >= 0) ::close(fd_);
  if (reader_ != nullptr) redisReaderFree(reader_);
  ssl_ = nullptr;
  ctx_ = nullptr;
  fd_ = -1;
  reader_ = nullptr;
  caps_.reset();
  phase_ = Phase::kClosed;
  ssl_wants_write_ = false;
}

void LoopRedisConnection::Later(std::function<void(LoopRedisConnection&)> task) {
  std::weak_ptr<LoopRedisConnection> weak = shared_from_this();
  const std::uint64_t call = call_;
  loop_.Post([weak, call, task = std::move(task)] {
    auto self = weak.lock();
    if (self && self->call_ == call && self->in_call_) task(*self);
  });
}

std::string LoopRedisConnection::Bound() const {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - started_);
  return std::to_string(ms.count()) + " ms";
}

void LoopRedisConnection::BeginCall(SteadyClock::time_point deadline) {
  in_call_ = true;
  started_ = SteadyClock::now();
  deadline_ = deadline;
  std::weak_ptr<LoopRedisConnection> weak = shared_from_this();
  const std::uint64_t call = call_;
  timer_.Arm(deadline, [weak, call] {
    auto self = weak.lock();
    if (self && self->call_ == call && self->in_call_) self->OnDeadline();
  });
}

void LoopRedisConnection::Connect(SteadyClock::time_point deadline,
                                  std::function<void(Failed)> done) {
  connect_done_ = std::move(done);
  if (phase_ != Phase::kReady) Drop();
  BeginCall(deadline);
  if (phase_ == Phase::kReady) {
    Later([](LoopRedisConnection& self) { self.Succeed(); });
    return;
  }
  if (SteadyClock::now() >= deadline) {
    Later([](LoopRedisConnection& self) {
      self.Fail(ProbeFailureReason::kTimeout, "connect: no time left");
    });
    return;
  }
  Resolve();
}

void LoopRedisConnection::Resolve() {
  phase_ = Phase::kResolving;
  const HostPort at = SplitHostPort(address_, "6379");
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (IsIpLiteral(at.host)) {
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    struct addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(at.host.c_str(), at.port.c_str(), &hints, &found);
    Later([rc, addresses = AddressesOf(rc == 0 ? found : nullptr)](LoopRedisConnection& self) {
      self.Resolved(rc, addresses);
    });
    return;
  }
  // A name: resolved off the loop by libuv, so a slow resolver stalls no other read.
  auto* resolution = new Resolution;
  resolution->request.data = resolution;
  resolution->connection = shared_from_this();
  const std::uint64_t call = call_;
  resolution->deliver = [weak = resolution->connection, call](int rc,
                                                              std::vector<std::string> found) {
    auto self = weak.lock();
    if (self && self->call_ == call && self->in_call_ && self->phase_ == Phase::kResolving) {
      self->Resolved(rc, std::move(found));
    }
  };
  const int rc = uv_getaddrinfo(
      loop_.loop(), &resolution->request,
      [](uv_getaddrinfo_t* request, int status, struct addrinfo* found) {
        auto* owned = static_cast<Resolution*>(request->data);
        owned->deliver(status == 0 ? 0 : EAI_NONAME, AddressesOf(status == 0 ? found : nullptr));
        delete owned;
      },
      at.host.c_str(), at.port.c_str(), &hints);
  if (rc != 0) {
    delete resolution;
    Later([](LoopRedisConnection& self) { self.Resolved(EAI_FAIL, {}); });
  }
}

void LoopRedisConnection::Resolved(int status, std::vector<std::string> addresses) {
  addresses_ = std::move(addresses);
  next_address_ = 0;
  if (status != 0 || addresses_.empty()) {
    Fail(ProbeFailureReason::kUnreachable,
         std::string("connect: ") + (status != 0 ? gai_strerror(status) : "no address"));
    return;
  }
  last_errno_ = 0;
  DialNext();
}

void LoopRedisConnection::DialNext() {
  watch_.reset();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (next_address_ >= addresses_.size()) {
    Fail(ConnectReason(last_errno_), std::string("connect: ") + std::strerror(last_errno_));
    return;
  }
  const std::string& address = addresses_[next_address_++];
  struct sockaddr_storage storage {};
  std::memcpy(&storage, address.data(), std::min(address.size(), sizeof(storage)));
  const auto* sa = reinterpret_cast<const struct sockaddr*>(&storage);
  fd_ = ::socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    last_errno_ = errno;
    Later([](LoopRedisConnection& self) { self.DialNext(); });
    return;
  }
  phase_ = Phase::kDialing;
  watch_ = std::make_unique<SocketWatch>(loop_, fd_);
  if (::connect(fd_, sa, static_cast<socklen_t>(address.size())) != 0 && errno != EINPROGRESS) {
    last_errno_ = errno;
    Later([](LoopRedisConnection& self) { self.DialNext(); });
    return;
  }
  Rewatch();
}

void LoopRedisConnection::Dialed() {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    last_errno_ = err;
    DialNext();
    return;
  }
  if (tls_) {
    StartTls();
  } else {
    TransportUp();
  }
}

void LoopRedisConnection::StartTls() {
  if (auto failure = NewRedisTlsSession(*tls_, address_, fd_, &ctx_, &ssl_, &tls_name_)) {
    return Fail(failure->reason, failure->message);
  }
  phase_ = Phase::kHandshake;
  Handshake();
}

void LoopRedisConnection::Handshake() {
  ERR_clear_error();
  const int rc = SSL_connect(ssl_);
  if (rc == 1) return TransportUp();
  const int error = SSL_get_error(ssl_, rc);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
    ssl_wants_write_ = error == SSL_ERROR_WANT_WRITE;
    Rewatch();
    return;
  }
  const ProbeFailure failure = RedisTlsHandshakeFailure(ssl_, error, tls_name_);
  Fail(failure.reason, failure.message);
}

void LoopRedisConnection::TransportUp() {
  reader_ = redisReaderCreate();
  caps_ = std::make_unique<RedisReplyCaps>();
  if (reader_ == nullptr) return Fail(ProbeFailureReason::kInternal, "out of memory");
  LimitRedisReader(reader_, caps_.get());
  phase_ = Phase::kReady;
  ssl_wants_write_ = false;
  if (!password_) return Succeed();
  std::vector<std::string> auth = {"AUTH"};
  if (!username_.empty()) auth.push_back(username_);
  auth.push_back(*password_);
  authenticating_ = true;
  Send({auth});
}

void LoopRedisConnection::Authenticated(Replies replies) {
  authenticating_ = false;
  auto& got = std::get<std::vector<RedisReplyPtr>>(replies);
  const redisReply& reply = *got.front();
  if (reply.type != REDIS_REPLY_ERROR) return Succeed();
  // The server's words name the user at most, never the password.
  const std::string text = reply.str != nullptr ? std::string(reply.str, reply.len) : "";
  Fail(ProbeFailureReason::kAuth, "AUTH refused: " + text.substr(0, 120));
}

void LoopRedisConnection::Pipeline(std::vector<std::vector<std::string>> commands,
                                   SteadyClock::time_point deadline,
                                   std::function<void(Replies)> done) {
  pipeline_done_ = std::move(done);
  BeginCall(deadline);
  if (phase_ != Phase::kReady) {
    Later([](LoopRedisConnection& self) {
      self.Fail(ProbeFailureReason::kInternal, "not connected");
    });
    return;
  }
  if (SteadyClock::now() >= deadline) {
    Later([](LoopRedisConnection& self) {
      self.Fail(ProbeFailureReason::kTimeout, "sending: no time left");
    });
    return;
  }
  Send(commands);
}

void LoopRedisConnection::Subscribe(std::vector<std::string> command,
                                    SteadyClock::time_point deadline,
                                    std::chrono::milliseconds reply_bound,
                                    std::function<void(RedisReplyPtr)> push,
                                    std::function<void(ProbeFailure)> ended) {
  push_ = std::move(push);
  ended_ = std::move(ended);
  reply_bound_ = reply_bound;
  pushes_ = 0;
  reply_begun_ = false;
  BeginCall(deadline);
  if (phase_ != Phase::kReady) {
    Later([](LoopRedisConnection& self) {
      self.Fail(ProbeFailureReason::kInternal, "not connected");
    });
    return;
  }
  Send({command});
  streaming_ = true;
  expected_ = 0;  // no count: replies go to push_ as they come
}

void LoopRedisConnection::Send(const std::vector<std::vector<std::string>>& commands) {
  std::optional<std::string> bytes = FormatRedisCommands(commands);
  if (!bytes) return Fail(ProbeFailureReason::kInternal, "sending: out of memory");
  out_ = std::move(*bytes);
  out_sent_ = 0;
  expected_ = commands.size();
  replies_.clear();
  budget_ = kMaxRedisPipelineBytes;
  received_ = 0;
  // Written from the socket's callback, never from inside the caller.
  Rewatch();
}

void LoopRedisConnection::Rewatch() {
  if (!watch_) return;
  bool read = false;
  bool write = false;
  if (phase_ == Phase::kDialing) {
    write = true;
  } else if (phase_ == Phase::kHandshake) {
    read = !ssl_wants_write_;
    write = ssl_wants_write_;
  } else if (phase_ == Phase::kReady && in_call_) {
    read = true;
    write = out_sent_ < out_.size() || ssl_wants_write_;
  }
  std::weak_ptr<LoopRedisConnection> weak = shared_from_this();
  const std::uint64_t call = call_;
  const bool watched = watch_->Watch(read, write, [weak, call] {
    auto self = weak.lock();
    if (self && self->call_ == call && self->in_call_) self->OnSocket();
  });
  if (!watched && (read || write)) {
    Later([](LoopRedisConnection& self) {
      self.Fail(ProbeFailureReason::kInternal, "the event loop refused the socket");
    });
  }
}

void LoopRedisConnection::OnSocket() {
  switch (phase_) {
    case Phase::kDialing:
      return Dialed();
    case Phase::kHandshake:
      return Handshake();
    case Phase::kReady:
      if (!Flush() || !ReadSome() || !TakeReplies()) return;
      if (in_call_ && (streaming_ || expected_ > replies_.size())) Rewatch();
      return;
    default:
      return;
  }
}

bool LoopRedisConnection::Flush() {
  ssl_wants_write_ = false;
  while (out_sent_ < out_.size()) {
    const char* data = out_.data() + out_sent_;
    const size_t left = out_.size() - out_sent_;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int n = SSL_write(ssl_, data, static_cast<int>(left));
      if (n > 0) {
        out_sent_ += static_cast<size_t>(n);
        continue;
      }
      const int error = SSL_get_error(ssl_, n);
      if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return true;
      Fail(ProbeFailureReason::kConnectionLost, "sending: " + OpenSslError());
      return false;
    }
    const ssize_t n = ::send(fd_, data, left, MSG_NOSIGNAL);
    if (n > 0) {
      out_sent_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    Fail(ProbeFailureReason::kConnectionLost, std::string("sending: ") + std::strerror(errno));
    return false;
  }
  return true;
}

bool LoopRedisConnection::ReadSome() {
  char buf[16 * 1024];
  for (;;) {
    ssize_t n = 0;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int got = SSL_read(ssl_, buf, sizeof(buf));
      if (got <= 0) {
        const int error = SSL_get_error(ssl_, got);
        if (error == SSL_ERROR_WANT_READ) return true;
        if (error == SSL_ERROR_WANT_WRITE) {
          ssl_wants_write_ = true;
          return true;
        }
        if (error == SSL_ERROR_ZERO_RETURN ||
            (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
          n = 0;
        } else {
          Fail(ProbeFailureReason::kConnectionLost, "reading: " + OpenSslError());
          return false;
        }
      } else {
        n = got;
      }
    } else {
      n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
      if (n < 0) {
        Fail(ProbeFailureReason::kConnectionLost, std::string("reading: ") + std::strerror(errno));
        return false;
      }
    }
    if (n == 0) {
      Fail(ProbeFailureReason::kConnectionLost, "reading: the server closed the connection after " +
                                                    std::to_string(received_) + " bytes, " +
                                                    std::to_string(replies_.size()) + " of " +
                                                    std::to_string(expected_) + " replies");
      return false;
    }
    if (static_cast<size_t>(n) > budget_) {
      Fail(ProbeFailureReason::kProtocol,
           std::string("reading: ") + (streaming_ ? "a reply" : "replies") + " larger than " +
               std::to_string(kMaxRedisPipelineBytes) + " bytes");
      return false;
    }
    budget_ -= static_cast<size_t>(n);
    received_ += static_cast<size_t>(n);
    if (redisReaderFeed(reader_, buf, static_cast<size_t>(n)) != REDIS_OK) {
      Fail(ProbeFailureReason::kInternal, "reading: out of memory");
      return false;
    }
    if (!TakeReplies()) return false;
    if (!in_call_ || replies_.size() == expected_) return true;
  }
}

bool LoopRedisConnection::TakeReplies() {
  if (streaming_) return TakePushes();
  while (in_call_ && replies_.size() < expected_) {
    if (reader_->ridx == -1) caps_->Begin();  // no reply half read: a new one starts
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      const std::optional<std::string> refused = caps_->RefusedArrayError();
      Fail(ProbeFailureReason::kProtocol,
           "reading: " + (refused ? *refused : std::string(reader_->errstr)));
      return false;
    }
    if (reply == nullptr) return true;
    replies_.emplace_back(static_cast<redisReply*>(reply));
  }
  if (in_call_ && replies_.size() == expected_) {
    if (authenticating_) {
      std::vector<RedisReplyPtr> got = std::move(replies_);
      replies_.clear();
      Authenticated(std::move(got));
      return false;
    }
    Succeed();
    return false;
  }
  return true;
}

bool LoopRedisConnection::TakePushes() {
  auto self = shared_from_this();  // push_ may let go of the last owner
  const std::uint64_t call = call_;
  for (;;) {
    // Each push is capped on its own, however many came before on the same subscription.
    if (NoReplyBegun(*reader_)) caps_->Begin();
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      const std::optional<std::string> refused = caps_->RefusedArrayError();
      Fail(ProbeFailureReason::kProtocol,
           "reading: " + (refused ? *refused : std::string(reader_->errstr)));
      return false;
    }
    if (reply == nullptr) break;
    RedisReplyPtr owned(static_cast<redisReply*>(reply));
    ++pushes_;
    reply_begun_ = false;
    // The byte cap is per reply here: what is buffered already counts against the next one.
    budget_ =
        kMaxRedisPipelineBytes - std::min(kMaxRedisPipelineBytes, reader_->len - reader_->pos);
    auto push = push_;  // push_ may Close(), which clears it
    push(std::move(owned));
    if (call_ != call || !in_call_) return false;
  }
  BoundPartialReply();
  return true;
}

void LoopRedisConnection::BoundPartialReply() {
  if (pushes_ == 0) return;  // the first reply is bounded by the call's deadline
  const bool partial = !NoReplyBegun(*reader_) || reader_->pos < reader_->len;
  if (!partial) {
    reply_begun_ = false;
    timer_.Stop();  // silence between replies is pub/sub's normal state
    return;
  }
  if (reply_begun_) return;
  reply_begun_ = true;
  std::weak_ptr<LoopRedisConnection> weak = shared_from_this();
  const std::uint64_t call = call_;
  timer_.Arm(SteadyClock::now() + reply_bound_, [weak, call] {
    auto self = weak.lock();
    if (!self || self->call_ != call || !self->in_call_) return;
    self->Fail(ProbeFailureReason::kTimeout,
               "a pushed reply was not complete within the reply bound of " +
                   std::to_string(self->reply_bound_.count()) + " ms (" +
                   std::to_string(self->received_) + " bytes read)");
  });
}

void LoopRedisConnection::OnDeadline() {
  std::string stage;
  switch (phase_) {
    case Phase::kResolving:
      stage = "no address resolved";
      break;
    case Phase::kDialing:
      stage = "no connection";
      break;
    case Phase::kHandshake:
      stage = "no TLS handshake";
      break;
    default:
      stage = authenticating_ ? "no answer to AUTH"
              : streaming_    ? "no complete answer to the subscription"
                              : "no complete answer";
      break;
  }
  std::string got;
  if (phase_ == Phase::kReady) {
    got = " (" + std::to_string(received_) + " bytes, " + std::to_string(replies_.size()) + " of " +
          std::to_string(expected_) + " replies)";
  }
  Fail(ProbeFailureReason::kTimeout,
       stage + " within the deadline of " + Bound() + ": the answer outlasted it" + got);
}

void LoopRedisConnection::Fail(ProbeFailureReason reason, const std::string& what) {
  auto connect_done = std::move(connect_done_);
  auto pipeline_done = std::move(pipeline_done_);
  auto ended = std::move(ended_);
  ProbeFailure failure{reason, address_ + ": " + what};
  Close();  // any failure drops the connection, and ends the call
  if (connect_done) connect_done(std::move(failure));
  if (pipeline_done) pipeline_done(std::move(failure));
  if (ended) ended(std::move(failure));
}

void LoopRedisConnection::Succeed() {
  timer_.Stop();
  auto connect_done = std::move(connect_done_);
  auto pipeline_done = std::move(pipeline_done_);
  connect_done_ = nullptr;
  pipeline_done_ = nullptr;
  ++call_;
  in_call_ = false;
  std::vector<RedisReplyPtr> replies = std::move(replies_);
  replies_.clear();
  out_.clear();
  out_sent_ = 0;
  if (watch_) watch_->Watch(false, false, nullptr);
  if (connect_done) connect_done(std::nullopt);
  if (pipeline_done) pipeline_done(std::move(replies));
}

}  // namespace sbd
