#pragma once

#include <prometheus/collectable.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

namespace httplib {
class Server;
}

namespace sbd {

/// The --web.config.file settings, in the Prometheus exporter-toolkit format
/// (tls_server_config.cert_file/key_file, basic_auth_users: name -> bcrypt hash).
struct WebConfig {
  std::string cert_file;
  std::string key_file;
  std::vector<std::pair<std::string, std::string>> basic_auth_users;
};

/// Reads a web config file strictly; errors name file:line:column: key.
std::variant<WebConfig, std::vector<std::string>> LoadWebConfig(const std::string& path);

/// Serves /metrics, /status, /runbooks/, /-/healthy and /-/ready over HTTP or HTTPS, with optional
/// basic auth. Thread-safe; owns a server thread, so neither copyable nor movable.
class Exporter {
 public:
  struct Sources {
    std::shared_ptr<prometheus::Collectable> metrics;
    std::function<std::string(bool as_text)> status;  ///< JSON, or the text table
    std::function<bool()> ready;                      ///< every cluster has had a round
    std::string runbooks_dir;  ///< served read-only under /runbooks/ when not empty
    /// /api/v1/declarations: GET lists, POST adds (body), DELETE /<id> removes. Each returns
    /// an HTTP status and a JSON body. Absent when not set.
    struct Answer {
      int status;
      std::string json;
    };
    std::function<Answer()> list_declarations;
    std::function<Answer(const std::string& body)> add_declaration;
    std::function<Answer(const std::string& id)> remove_declaration;
  };

  Exporter(Sources sources, WebConfig web);
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  /// Binds "host:port" (":port" means all interfaces); false with a reason on failure.
  bool Bind(const std::string& listen_address, std::string* error);
  /// Serves on a background thread until Stop().
  void Start();
  void Stop();
  int port() const { return port_; }

 private:
  void Route();
  bool Authorized(const std::string& authorization_header) const;

  Sources sources_;
  WebConfig web_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace sbd
