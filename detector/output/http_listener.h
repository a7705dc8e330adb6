#pragma once

#include <httplib.h>
#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace sbd {

/// What one connection may cost before it is dropped.
struct ListenerLimits {
  /// Request line and headers together; more without a blank line closes with 431.
  size_t max_head_bytes = 32 * 1024;
  /// Body bytes read after the head (the exporter also refuses a larger Content-Length).
  size_t max_body_bytes = 64 * 1024;
  /// From accept to a complete head, TLS handshake included.
  std::chrono::milliseconds head_deadline{5000};
  /// For the body, once the head is complete.
  std::chrono::milliseconds body_deadline{5000};
  /// Unused since answers are sent by the gatherer (kept for configs that set it).
  std::chrono::milliseconds write_timeout{5000};
  /// The whole connection, from accept to the answer's last byte.
  std::chrono::milliseconds connection_deadline{30000};
  /// Connections still sending their head; a new one beyond this drops the oldest.
  size_t max_pending = 256;
  /// Threads that run handlers, and complete requests waiting for one (more get 503).
  size_t workers = 8;
  size_t max_queued = 64;
  /// Answers being sent to slow readers, all together; beyond, the oldest is dropped.
  size_t max_unsent_bytes = 256u << 20;
};

/// An httplib::Server whose connections are accepted, read and bounded here rather than by
/// httplib's thread-per-connection loop: one thread gathers request heads and bodies (with a
/// Content-Length) from every connection with poll(), and sends every answer (a slow client
/// costs a slot and its bytes, never a thread), and a fixed pool runs each complete request
/// through httplib's routing into a buffer, one request per connection. A worker waits on a
/// client only for a body announced with "Expect: 100-continue", after the request was
/// screened. Routes are added through the httplib::Server interface before Serve().
/// Thread-safe: Serve() on one thread, Shutdown() from any.
class BoundedServer : public httplib::Server {
 public:
  /// `tls` (owned; may be null for plain HTTP) is the context every connection is accepted with.
  BoundedServer(ListenerLimits limits, SSL_CTX* tls);
  ~BoundedServer() override;

  /// Accepts on the socket bound with bind_to_port/bind_to_any_port until Shutdown().
  void Serve();
  /// Replaces the TLS context for connections accepted from now on (a rotated certificate);
  /// false (and `tls` freed) when it would switch between HTTP and HTTPS, which needs a restart.
  bool SetTls(SSL_CTX* tls);
  /// Stops accepting, drops pending connections, waits for running requests; idempotent.
  void Shutdown();

  struct Connection;

 private:
  void Gather();
  /// Accepts what waits on `listener` into `pending` (at most 64 at a time).
  void Accept(socket_t listener, std::vector<std::unique_ptr<Connection>>& pending);
  void Work();
  void Handle(Connection& connection);
  /// Hands a handled connection back to the gatherer, which sends its answer.
  void Answered(std::unique_ptr<Connection> connection);
  /// Moves `connection` to the queue; false (and `connection` left alone) when it is full.
  bool Enqueue(std::unique_ptr<Connection>& connection);

  const ListenerLimits limits_;
  std::mutex tls_mu_;
  SSL_CTX* tls_;  // guarded by tls_mu_
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::unique_ptr<Connection>> queue_;
  std::vector<std::unique_ptr<Connection>> answered_;  ///< under queue_mu_, for the gatherer
  std::vector<std::thread> workers_;
};

}  // namespace sbd
