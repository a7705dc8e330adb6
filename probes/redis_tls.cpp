#include "probes/redis_tls.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>

#include "probes/redis_wire.h"

namespace sbd {

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

}  // namespace sbd
