#include "probes/redis_tls.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "probes/redis_client.h"
#include "probes/redis_wire.h"

namespace sbd {
namespace {

// Milliseconds left before the deadline, rounded up; 0 when it has passed.
int MillisLeft(SteadyClock::time_point deadline) {
  const auto left = deadline - SteadyClock::now();
  if (left <= SteadyClock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > 60 * 60 * 1000 ? 60 * 60 * 1000 : static_cast<int>(ms);
}

// 1 ready, 0 timed out, -1 error (errno).
int PollFor(int fd, short events, SteadyClock::time_point deadline) {
  for (;;) {
    const int wait = MillisLeft(deadline);
    if (wait == 0) return 0;
    struct pollfd p {};
    p.fd = fd;
    p.events = events;
    const int n = ::poll(&p, 1, wait);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n;
    return 1;
  }
}

// A non-blocking connect to one resolved address; the socket, or -1 with `*err` set.
int ConnectOne(const struct addrinfo& ai, SteadyClock::time_point deadline, int* err) {
  const int fd =
      ::socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  if (::connect(fd, ai.ai_addr, ai.ai_addrlen) == 0) return fd;
  *err = errno;
  if (*err == EINPROGRESS) {
    const int ready = PollFor(fd, POLLOUT, deadline);
    socklen_t len = sizeof(*err);
    if (ready == 0) {
      *err = ETIMEDOUT;
    } else if (ready < 0) {
      *err = errno;
    } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &len) != 0) {
      *err = errno;
    }
    if (*err == 0) return fd;
  }
  ::close(fd);
  return -1;
}

}  // namespace

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no detail from OpenSSL";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

ProbeFailureReason ConnectReason(int err) {
  if (err == ECONNREFUSED) return ProbeFailureReason::kRefused;
  if (err == ENETUNREACH || err == EHOSTUNREACH) return ProbeFailureReason::kUnreachable;
  if (err == ETIMEDOUT) return ProbeFailureReason::kTimeout;
  return ProbeFailureReason::kConnectionLost;
}

std::optional<ProbeFailure> NewRedisTlsSession(const RedisTlsSpec& tls, const std::string& address,
                                               int fd, SSL_CTX** ctx, SSL** ssl,
                                               std::string* name) {
  const auto failed = [](ProbeFailureReason reason, std::string message) {
    return ProbeFailure{reason, std::move(message)};
  };
  ERR_clear_error();
  *ctx = SSL_CTX_new(TLS_client_method());
  if (*ctx == nullptr) return failed(ProbeFailureReason::kInternal, "TLS: " + OpenSslError());
  SSL_CTX_set_min_proto_version(*ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(*ctx, SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_load_verify_locations(*ctx, tls.ca_file.c_str(), nullptr) != 1) {
    return failed(ProbeFailureReason::kConfig,
                  "tls_ca_file " + tls.ca_file + ": " + OpenSslError());
  }
  if (!tls.cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(*ctx, tls.cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(*ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
       SSL_CTX_check_private_key(*ctx) != 1)) {
    return failed(ProbeFailureReason::kConfig,
                  "tls_cert_file/tls_key_file " + tls.cert_file + ": " + OpenSslError());
  }
  *ssl = SSL_new(*ctx);
  if (*ssl == nullptr || SSL_set_fd(*ssl, fd) != 1) {
    return failed(ProbeFailureReason::kInternal, "TLS: " + OpenSslError());
  }
  *name = tls.server_name.empty() ? SplitHostPort(address, "6379").host : tls.server_name;
  const bool named = IsIpLiteral(*name)
                         ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(*ssl), name->c_str()) == 1
                         : SSL_set_tlsext_host_name(*ssl, name->c_str()) == 1 &&
                               SSL_set1_host(*ssl, name->c_str()) == 1;
  if (!named) return failed(ProbeFailureReason::kConfig, "TLS server name " + *name + " refused");
  return std::nullopt;
}

ProbeFailure RedisTlsHandshakeFailure(SSL* ssl, int ssl_error, const std::string& name) {
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    return {ProbeFailureReason::kProtocol, std::string("TLS certificate verification failed for ") +
                                               name + ": " + X509_verify_cert_error_string(verify)};
  }
  if ((ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_ZERO_RETURN) &&
      ERR_peek_error() == 0) {
    return {ProbeFailureReason::kConnectionLost,
            "the server closed the connection during the TLS handshake"};
  }
  return {ProbeFailureReason::kProtocol, "TLS handshake failed: " + OpenSslError()};
}

RedisTlsConnection::RedisTlsConnection(std::string address, RedisTlsSpec tls)
    : address_(std::move(address)), tls_(std::move(tls)) {}

RedisTlsConnection::~RedisTlsConnection() { Close(); }

void RedisTlsConnection::Close() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  if (fd_ >= 0) ::close(fd_);
  if (reader_ != nullptr) redisReaderFree(reader_);
  ssl_ = nullptr;
  ctx_ = nullptr;
  fd_ = -1;
  reader_ = nullptr;
}

ProbeFailure RedisTlsConnection::Failed(ProbeFailureReason reason, const std::string& what) {
  Close();
  return ProbeFailure{reason, address_ + ": " + what};
}

std::optional<ProbeFailure> RedisTlsConnection::Connect(SteadyClock::time_point deadline) {
  if (connected()) return std::nullopt;
  Close();
  if (auto failure = Dial(deadline)) return failure;
  if (auto failure = Handshake(deadline)) return failure;
  reader_ = redisReaderCreate();
  if (reader_ == nullptr) return Failed(ProbeFailureReason::kInternal, "out of memory");
  LimitRedisReader(reader_);
  return std::nullopt;
}

std::optional<ProbeFailure> RedisTlsConnection::Dial(SteadyClock::time_point deadline) {
  const HostPort at = SplitHostPort(address_, "6379");
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(at.host.c_str(), at.port.c_str(), &hints, &found);
  if (rc != 0)
    return Failed(ProbeFailureReason::kUnreachable, std::string("connect: ") + gai_strerror(rc));
  int err = 0;
  for (const struct addrinfo* ai = found; ai != nullptr && fd_ < 0; ai = ai->ai_next) {
    fd_ = ConnectOne(*ai, deadline, &err);
  }
  ::freeaddrinfo(found);
  if (fd_ >= 0) return std::nullopt;
  return Failed(ConnectReason(err), std::string("connect: ") + std::strerror(err));
}

std::optional<ProbeFailure> RedisTlsConnection::Handshake(SteadyClock::time_point deadline) {
  std::string name;
  if (auto failure = NewRedisTlsSession(tls_, address_, fd_, &ctx_, &ssl_, &name)) {
    return Failed(failure->reason, failure->message);
  }
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl_);
    if (rc == 1) return std::nullopt;
    const int error = SSL_get_error(ssl_, rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (auto late = Wait(error, deadline, "TLS handshake")) return late;
      continue;
    }
    const ProbeFailure failure = RedisTlsHandshakeFailure(ssl_, error, name);
    return Failed(failure.reason, failure.message);
  }
}

std::optional<ProbeFailure> RedisTlsConnection::Wait(int ssl_error,
                                                     SteadyClock::time_point deadline,
                                                     const char* doing) {
  const short events = ssl_error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
  const int ready = PollFor(fd_, events, deadline);
  if (ready > 0) return std::nullopt;
  if (ready == 0) return Failed(ProbeFailureReason::kTimeout, std::string(doing) + ": timed out");
  return Failed(ProbeFailureReason::kConnectionLost,
                std::string(doing) + ": " + std::strerror(errno));
}

std::optional<ProbeFailure> RedisTlsConnection::WriteAll(const std::string& bytes,
                                                         SteadyClock::time_point deadline) {
  size_t offset = 0;
  while (offset < bytes.size()) {
    ERR_clear_error();
    const int n = SSL_write(ssl_, bytes.data() + offset, static_cast<int>(bytes.size() - offset));
    if (n > 0) {
      offset += static_cast<size_t>(n);
      continue;
    }
    const int error = SSL_get_error(ssl_, n);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (auto late = Wait(error, deadline, "sending")) return late;
      continue;
    }
    return Failed(ProbeFailureReason::kConnectionLost, "sending: " + OpenSslError());
  }
  return std::nullopt;
}

std::variant<void*, ProbeFailure> RedisTlsConnection::ReadReply(SteadyClock::time_point deadline,
                                                                std::size_t* budget, bool idle_ok) {
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      const std::optional<std::string> refused = RefusedArrayError();
      return Failed(ProbeFailureReason::kProtocol,
                    "reading: " + (refused ? *refused : std::string(reader_->errstr)));
    }
    if (reply != nullptr) return reply;
    char buf[16 * 1024];
    ERR_clear_error();
    const int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n > 0) {
      if (static_cast<size_t>(n) > *budget) {
        return Failed(
            ProbeFailureReason::kProtocol,
            "reading: replies larger than " + std::to_string(kMaxRedisPipelineBytes) + " bytes");
      }
      *budget -= static_cast<size_t>(n);
      if (redisReaderFeed(reader_, buf, static_cast<size_t>(n)) != REDIS_OK) {
        return Failed(ProbeFailureReason::kInternal, "reading: out of memory");
      }
      continue;
    }
    const int error = SSL_get_error(ssl_, n);
    if (idle_ok && error == SSL_ERROR_WANT_READ) {
      const int ready = PollFor(fd_, POLLIN, deadline);
      if (ready == 0) return static_cast<void*>(nullptr);  // nothing yet: not a failure
      if (ready > 0) continue;
    }
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (auto late = Wait(error, deadline, "reading")) return *late;
      continue;
    }
    if (error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
      return Failed(ProbeFailureReason::kConnectionLost,
                    "reading: the server closed the connection");
    }
    return Failed(ProbeFailureReason::kConnectionLost, "reading: " + OpenSslError());
  }
}

std::optional<std::string> FormatRedisCommands(
    const std::vector<std::vector<std::string>>& commands) {
  std::string bytes;
  for (const auto& command : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const auto& arg : command) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    char* formatted = nullptr;
    const int len = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), argv.data(),
                                           lengths.data());
    if (len < 0 || formatted == nullptr) return std::nullopt;
    bytes.append(formatted, static_cast<size_t>(len));
    redisFreeCommand(formatted);
  }
  return bytes;
}

std::optional<ProbeFailure> RedisTlsConnection::Send(const std::vector<std::string>& command,
                                                     SteadyClock::time_point deadline) {
  if (!connected()) return ProbeFailure{ProbeFailureReason::kInternal, "not connected"};
  const std::optional<std::string> bytes = FormatRedisCommands({command});
  if (!bytes) return Failed(ProbeFailureReason::kInternal, "sending: out of memory");
  return WriteAll(*bytes, deadline);
}

std::variant<void*, ProbeFailure> RedisTlsConnection::ReadPushed(SteadyClock::time_point until,
                                                                 std::size_t* budget) {
  if (!connected()) return ProbeFailure{ProbeFailureReason::kInternal, "not connected"};
  return ReadReply(until, budget, /*idle_ok=*/true);
}

std::variant<std::vector<RedisValue>, ProbeFailure> RedisTlsConnection::Pipeline(
    const std::vector<std::vector<std::string>>& commands, SteadyClock::time_point deadline) {
  if (!connected()) return ProbeFailure{ProbeFailureReason::kInternal, "not connected"};
  const std::optional<std::string> bytes = FormatRedisCommands(commands);
  if (!bytes) return Failed(ProbeFailureReason::kInternal, "sending: out of memory");
  if (auto failure = WriteAll(*bytes, deadline)) return *failure;
  std::vector<RedisValue> values;
  std::size_t budget = kMaxRedisPipelineBytes;
  for (size_t i = 0; i < commands.size(); ++i) {
    BeginBoundedReply();
    auto read = ReadReply(deadline, &budget);
    if (auto* failure = std::get_if<ProbeFailure>(&read)) return *failure;
    auto* reply = static_cast<redisReply*>(std::get<void*>(read));
    values.push_back(RedisValueOf(*reply));
    freeReplyObject(reply);
  }
  return values;
}

}  // namespace sbd
