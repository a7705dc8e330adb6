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

/// OpenSSL's queued error as text (the first, most specific one), and the queue emptied.
std::string OpenSslError();
/// True when `host` is an IPv4 or IPv6 address literal.
bool IsIpLiteral(const std::string& host);
/// What a connect() that ended with `err` failed as.
ProbeFailureReason ConnectReason(int err);

/// The commands in Redis' wire format (hiredis' redisFormatCommandArgv, one after another);
/// nullopt when hiredis refuses one.
std::optional<std::string> FormatRedisCommands(
    const std::vector<std::vector<std::string>>& commands);

/// A TLS client session over the connected socket `fd`, set up as `tls` says: TLS 1.2 or later,
/// the peer's certificate verified against `tls.ca_file` and for `tls.server_name` (default:
/// the host of `address`; an IP literal must be among its IP SANs), and the client certificate
/// when configured. On success `*ctx` and `*ssl` are set, the caller frees them, and `*name` is
/// the name verified; a failure names the key at fault (`config`) or OpenSSL's reason.
std::optional<ProbeFailure> NewRedisTlsSession(const RedisTlsSpec& tls, const std::string& address,
                                               int fd, ssl_ctx_st** ctx, ssl_st** ssl,
                                               std::string* name);
/// Why SSL_connect failed with `ssl_error` (neither WANT_READ nor WANT_WRITE) on `ssl`, for the
/// server `name`: a certificate that does not verify, the server closing, or OpenSSL's reason.
ProbeFailure RedisTlsHandshakeFailure(ssl_st* ssl, int ssl_error, const std::string& name);

}  // namespace sbd
