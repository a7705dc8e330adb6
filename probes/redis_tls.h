#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/probe.h"

struct ssl_st;
struct ssl_ctx_st;
struct redisReader;

namespace sbd {

struct RedisValue;

/// OpenSSL's queued error as text (the first, most specific one), and the queue emptied.
std::string OpenSslError();
/// True when `host` is an IPv4 or IPv6 address literal.
bool IsIpLiteral(const std::string& host);
/// What a connect() that ended with `err` failed as.
ProbeFailureReason ConnectReason(int err);

/// The commands in Redis' wire format (hiredis' redisFormatCommandArgv, one after another);
/// nullopt when hiredis refuses one. Shared by the blocking and the event-loop connection.
std::optional<std::string> FormatRedisCommands(
    const std::vector<std::vector<std::string>>& commands);

/// A TLS client session over the connected socket `fd`, set up as `tls` says: TLS 1.2 or later,
/// the peer's certificate verified against `tls.ca_file` and for `tls.server_name` (default:
/// the host of `address`; an IP literal must be among its IP SANs), and the client certificate
/// when configured. On success `*ctx` and `*ssl` are set, the caller frees them, and `*name` is
/// the name verified; a failure names the key at fault (`config`) or OpenSSL's reason. Shared by
/// the blocking and the event-loop connection.
std::optional<ProbeFailure> NewRedisTlsSession(const RedisTlsSpec& tls, const std::string& address,
                                               int fd, ssl_ctx_st** ctx, ssl_st** ssl,
                                               std::string* name);
/// Why SSL_connect failed with `ssl_error` (neither WANT_READ nor WANT_WRITE) on `ssl`, for the
/// server `name`: a certificate that does not verify, the server closing, or OpenSSL's reason.
ProbeFailure RedisTlsHandshakeFailure(ssl_st* ssl, int ssl_error, const std::string& name);

/// One TLS connection to a Redis server or sentinel (OpenSSL over a non-blocking socket):
/// the peer's certificate must chain to the configured CA and name the server; commands are
/// formatted by hiredis (redisFormatCommandArgv) and replies parsed by its reader, under the
/// same caps as the plain path (probes/redis_wire.h). Every wait is a poll() bounded by the
/// call's deadline. Any failure closes the connection. RedisClient uses it when the block
/// says `tls: true`. Not thread-safe; not copyable.
class RedisTlsConnection {
 public:
  RedisTlsConnection(std::string address, RedisTlsSpec tls);
  ~RedisTlsConnection();
  RedisTlsConnection(const RedisTlsConnection&) = delete;
  RedisTlsConnection& operator=(const RedisTlsConnection&) = delete;

  /// Dials, handshakes and verifies the peer; nullopt on success (or when already connected).
  std::optional<ProbeFailure> Connect(SteadyClock::time_point deadline);
  /// Writes every command at once and reads one reply per command. Needs Connect().
  std::variant<std::vector<RedisValue>, ProbeFailure> Pipeline(
      const std::vector<std::vector<std::string>>& commands, SteadyClock::time_point deadline);
  /// Writes one command without reading its reply (a SUBSCRIBE: see ReadPushed()).
  std::optional<ProbeFailure> Send(const std::vector<std::string>& command,
                                   SteadyClock::time_point deadline);
  /// Reads the next reply the server sends unasked (a subscription's), waiting until `until`:
  /// nullptr when none is complete by then, the connection kept and a half-read reply kept in
  /// the reader. `*budget` as Pipeline's; the caller starts each reply's element count with
  /// BeginBoundedReply(). Needs Connect().
  std::variant<void*, ProbeFailure> ReadPushed(SteadyClock::time_point until, std::size_t* budget);
  void Close();
  bool connected() const { return ssl_ != nullptr; }

 private:
  std::optional<ProbeFailure> Dial(SteadyClock::time_point deadline);
  std::optional<ProbeFailure> Handshake(SteadyClock::time_point deadline);
  std::optional<ProbeFailure> WriteAll(const std::string& bytes, SteadyClock::time_point deadline);
  /// One reply; with `idle_ok`, nullptr when none is complete at the deadline (no failure).
  std::variant<void*, ProbeFailure> ReadReply(SteadyClock::time_point deadline, std::size_t* budget,
                                              bool idle_ok = false);
  /// The commands in the wire format, or nullopt when hiredis could not format them.
  /// Waits until the socket is ready for what OpenSSL asked (`ssl_error` WANT_READ/WRITE).
  std::optional<ProbeFailure> Wait(int ssl_error, SteadyClock::time_point deadline,
                                   const char* doing);
  ProbeFailure Failed(ProbeFailureReason reason, const std::string& what);

  std::string address_;
  RedisTlsSpec tls_;
  int fd_ = -1;
  ssl_ctx_st* ctx_ = nullptr;
  ssl_st* ssl_ = nullptr;
  redisReader* reader_ = nullptr;
};

}  // namespace sbd
