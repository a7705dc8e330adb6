#pragma once

#include <prometheus/collectable.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "detector/config/web_config.h"
#include "detector/output/http_listener.h"
#include "detector/output/status_page.h"

namespace sbd {

/// A declaration body as the API keeps it: `author` is the authenticated `user` (whatever the
/// body says), or, with no user (changes open to anyone), the body's own author prefixed
/// "unauthenticated:". A body that is not a YAML/JSON mapping comes back as it is, for the
/// store to explain what is wrong with it; a rewritten one is re-emitted as block YAML.
std::string BodyWithAuthor(const std::string& body, const std::optional<std::string>& user);

/// How the exporter guards its HTTP surface.
struct ExporterOptions {
  /// Lets POST and DELETE on /api/v1/declarations through without basic_auth_users (the
  /// --web.allow-unauthenticated-changes flag, for a trusted network only).
  bool allow_unauthenticated_changes = false;
  ListenerLimits limits;
};

/// Serves /metrics, /status, /runbooks/, /-/healthy, /-/ready, the declarations API and the
/// incident log over
/// HTTP or HTTPS, with optional basic auth. Every request is bounded (see ListenerLimits);
/// changes through the API need an authenticated user unless explicitly opened. Thread-safe;
/// owns a server thread, so neither copyable nor movable.
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
    /// POST's body has its `author` set by BodyWithAuthor first.
    std::function<Answer()> list_declarations;
    std::function<Answer(const std::string& body)> add_declaration;
    std::function<Answer(const std::string& id)> remove_declaration;
    /// GET /api/v1/incidents with its query parameters (cluster, since, limit). Absent when
    /// not set.
    std::function<Answer(const std::multimap<std::string, std::string>& query)> list_incidents;
    /// The incident log's events of some clusters, for the status page's incident charts.
    /// Absent when not set: the page then draws the members' writable streaks only.
    IncidentEventSource incident_events;
  };

  Exporter(Sources sources, const WebConfig& web, ExporterOptions options = {});
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  /// Binds "host:port" (":port" means all interfaces); false with a reason on failure.
  bool Bind(const std::string& listen_address, std::string* error);
  /// Serves on a background thread until Stop().
  void Start();
  void Stop();
  int port() const { return port_; }

  /// Takes a reloaded web config: users are swapped at once for the next request, and a
  /// certificate re-read. False with a reason when part of it cannot apply (switching between
  /// HTTP and HTTPS needs a restart; an unreadable certificate keeps the old one).
  bool SetWebConfig(const WebConfig& web, std::string* error);
  /// Re-reads `path` (on SIGHUP) and applies it with SetWebConfig. An invalid file is logged
  /// with every error and the last good config kept; either way the outcome is the gauge
  /// splitbrain_web_config_last_reload_successful on /metrics.
  bool ReloadWebConfig(const std::string& path);

 private:
  void Route();
  bool Screen(const httplib::Request& req, httplib::Response& res);
  std::shared_ptr<const BasicAuth> Auth() const;

  Sources sources_;
  const ExporterOptions options_;
  std::shared_ptr<const BasicAuth> auth_;  // std::atomic_load/atomic_store
  std::shared_ptr<std::atomic<bool>> web_reload_ok_ = std::make_shared<std::atomic<bool>>(true);
  std::string tls_error_;
  bool tls_ = false;
  std::unique_ptr<BoundedServer> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace sbd
