#include "detector/output/exporter.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <prometheus/metric_family.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "detector/common/internal_errors.h"
#include "detector/common/json_text.h"
#include "detector/common/logfmt.h"
#include "detector/output/metrics.h"
#include "detector/output/status_page.h"

namespace sbd {
namespace {

// The user a request authenticated as, set by Screen() on the thread that then runs the
// request's handler (the listener runs each request on one thread from head to answer).
thread_local std::optional<std::string> t_request_user;

const char* kChangesNeedAuth =
    "changing declarations needs an authenticated user: set basic_auth_users in "
    "--web.config.file, or start with --web.allow-unauthenticated-changes on a trusted network";

SSL_CTX* MakeTlsContext(const WebConfig& web, std::string* error) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx != nullptr && SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
      SSL_CTX_use_certificate_chain_file(ctx, web.cert_file.c_str()) == 1 &&
      SSL_CTX_use_PrivateKey_file(ctx, web.key_file.c_str(), SSL_FILETYPE_PEM) == 1 &&
      SSL_CTX_check_private_key(ctx) == 1) {
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return ctx;
  }
  char reason[256] = "unknown error";
  if (const unsigned long code = ERR_get_error()) ERR_error_string_n(code, reason, sizeof(reason));
  ERR_clear_error();
  *error =
      "cannot load TLS certificate " + web.cert_file + " or key " + web.key_file + ": " + reason;
  if (ctx != nullptr) SSL_CTX_free(ctx);
  return nullptr;
}

void Refuse(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(JsonText(nlohmann::json{{"error", message}}) + "\n", "application/json");
}

bool IsChange(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

// The detector's metrics and the exporter's own.
class ExporterMetrics : public prometheus::Collectable {
 public:
  ExporterMetrics(std::shared_ptr<prometheus::Collectable> detector,
                  std::shared_ptr<std::atomic<bool>> web_reload_ok)
      : detector_(std::move(detector)), web_reload_ok_(std::move(web_reload_ok)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families = detector_->Collect();
    prometheus::MetricFamily reload;
    reload.name = "splitbrain_web_config_last_reload_successful";
    reload.help = "1 when the last reload of --web.config.file succeeded (or none was needed)";
    reload.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric value;
    value.gauge.value = web_reload_ok_->load() ? 1 : 0;
    reload.metric.push_back(value);
    families.push_back(std::move(reload));
    return families;
  }

 private:
  std::shared_ptr<prometheus::Collectable> detector_;
  std::shared_ptr<std::atomic<bool>> web_reload_ok_;
};

}  // namespace

std::string BodyWithAuthor(const std::string& body, const std::optional<std::string>& user) {
  try {
    YAML::Node node = YAML::Load(body);
    if (!node.IsMap()) return body;
    if (user) {
      node["author"] = *user;
    } else {
      const YAML::Node given = node["author"];
      if (!given || !given.IsScalar() || given.Scalar().empty()) return body;
      node["author"] = "unauthenticated:" + given.Scalar();
    }
    YAML::Emitter out;
    out << node;
    return out.good() ? std::string(out.c_str()) + "\n" : body;
  } catch (const YAML::Exception&) {
    return body;
  }
}

Exporter::Exporter(Sources sources, const WebConfig& web, ExporterOptions options)
    : sources_(std::move(sources)),
      options_(std::move(options)),
      auth_(std::make_shared<const BasicAuth>(web.basic_auth_users)),
      tls_(!web.cert_file.empty()) {
  SSL_CTX* tls = tls_ ? MakeTlsContext(web, &tls_error_) : nullptr;
  server_ = std::make_unique<BoundedServer>(options_.limits, tls);
  server_->set_payload_max_length(options_.limits.max_body_bytes);
  if (sources_.metrics) {
    sources_.metrics = std::make_shared<ExporterMetrics>(sources_.metrics, web_reload_ok_);
  }
  Route();
}

Exporter::~Exporter() { Stop(); }

std::shared_ptr<const BasicAuth> Exporter::Auth() const { return std::atomic_load(&auth_); }

bool Exporter::SetWebConfig(const WebConfig& web, std::string* error) {
  std::atomic_store(&auth_, std::make_shared<const BasicAuth>(web.basic_auth_users));
  if (web.cert_file.empty() != !tls_) {
    *error = tls_ ? "turning TLS off needs a restart; still serving HTTPS"
                  : "turning TLS on needs a restart; still serving plain HTTP";
    return false;
  }
  if (!tls_) return true;
  SSL_CTX* tls = MakeTlsContext(web, error);
  if (tls == nullptr) {
    *error += "; keeping the certificate loaded before";
    return false;
  }
  server_->SetTls(tls);
  return true;
}

bool Exporter::ReloadWebConfig(const std::string& path) {
  auto loaded = LoadWebConfig(path);
  if (auto* errors = std::get_if<std::vector<std::string>>(&loaded)) {
    for (const auto& e : *errors) spdlog::error("msg=\"invalid web config\" error=\"{}\"", e);
    spdlog::error("msg=\"web config reload failed; keeping the last good one\" file={}", path);
    web_reload_ok_->store(false);
    return false;
  }
  const WebConfig& web = std::get<WebConfig>(loaded);
  std::string error;
  const bool applied = SetWebConfig(web, &error);
  web_reload_ok_->store(applied);
  if (!applied) {
    spdlog::error("msg=\"web config partly applied\" error=\"{}\"", error);
    return false;
  }
  spdlog::info("msg=\"web config reloaded\" users={} tls={}", web.basic_auth_users.size(),
               tls_ ? "on" : "off");
  return applied;
}

// Runs before httplib reads a body: refuses what is not bounded or not allowed, cheapest
// checks first, and authenticates.
bool Exporter::Screen(const httplib::Request& req, httplib::Response& res) {
  t_request_user.reset();
  if (req.has_header("Transfer-Encoding")) {
    Refuse(res, 411, "send a body with Content-Length, not Transfer-Encoding");
    return false;
  }
  if (req.has_header("Content-Encoding")) {
    Refuse(res, 415, "compressed request bodies are not accepted");
    return false;
  }
  const std::string length = req.get_header_value("Content-Length");
  if (!length.empty()) {
    const bool digits =
        length.size() <= 19 && length.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoull(length) > options_.limits.max_body_bytes) {
      Refuse(
          res, 413,
          "a request body is at most " + std::to_string(options_.limits.max_body_bytes) + " bytes");
      return false;
    }
  } else if (req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
    Refuse(res, 411, "send the body with Content-Length");
    return false;
  }
  const auto auth = Auth();
  if (auth->enabled()) {
    const AuthOutcome outcome = auth->Check(req.get_header_value("Authorization"), req.remote_addr);
    if (outcome.shed) {
      // bcrypt is busy with others: a flood of wrong passwords is shed, never queued.
      res.status = 429;
      res.set_header("Retry-After", "1");
      res.set_content("Too many authentication attempts; retry shortly\n", "text/plain");
      return false;
    }
    t_request_user = outcome.user;
    if (!t_request_user) {
      res.status = 401;
      res.set_header("WWW-Authenticate", "Basic realm=\"splitbrain-detector\"");
      res.set_content("Unauthorized\n", "text/plain");
      return false;
    }
  } else if (IsChange(req.method) && !options_.allow_unauthenticated_changes) {
    Refuse(res, 403, kChangesNeedAuth);
    return false;
  }
  return true;
}

void Exporter::Route() {
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return Screen(req, res) ? httplib::Server::HandlerResponse::Unhandled
                            : httplib::Server::HandlerResponse::Handled;
  });
  // A client that waits for "100 Continue" learns a refusal before it sends the body.
  server_->set_expect_100_continue_handler(
      [this](const httplib::Request& req, httplib::Response& res) {
        return Screen(req, res) ? 100 : res.status;
      });
  server_->set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr error) {
        std::string what = "unknown";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        CountInternalError("http handler", req.method + " " + LogfmtEscape(req.path) + ": " + what);
        Refuse(res, 500, "internal error; see the detector's log");
      });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderMetrics(*sources_.metrics), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/status", [this](const httplib::Request& req, httplib::Response& res) {
    const bool text = req.get_param_value("format") == "text";
    res.set_content(sources_.status(text), text ? "text/plain; charset=utf-8" : "application/json");
  });
  if (sources_.list_declarations) {
    auto reply = [](httplib::Response& res, const Sources::Answer& answer) {
      res.status = answer.status;
      res.set_content(answer.json, "application/json");
    };
    server_->Get("/api/v1/declarations",
                 [this, reply](const httplib::Request&, httplib::Response& res) {
                   reply(res, sources_.list_declarations());
                 });
    server_->Post("/api/v1/declarations",
                  [this, reply](const httplib::Request& req, httplib::Response& res) {
                    reply(res, sources_.add_declaration(BodyWithAuthor(req.body, t_request_user)));
                  });
    server_->Delete(R"(/api/v1/declarations/([A-Za-z0-9_.\-]+))",
                    [this, reply](const httplib::Request& req, httplib::Response& res) {
                      reply(res, sources_.remove_declaration(req.matches[1]));
                    });
  }
  if (sources_.list_incidents) {
    server_->Get("/api/v1/incidents", [this](const httplib::Request& req, httplib::Response& res) {
      const Sources::Answer answer = sources_.list_incidents(req.params);
      res.status = answer.status;
      res.set_content(answer.json, "application/json");
    });
  }
  if (!sources_.runbooks_dir.empty()) {
    // The runbook_url of every alert resolves here, wherever the detector runs.
    server_->set_mount_point("/runbooks", sources_.runbooks_dir);
    server_->set_file_extension_and_mimetype_mapping("md", "text/markdown; charset=utf-8");
  }
  server_->Get("/-/healthy", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("Healthy\n", "text/plain");
  });
  server_->Get("/-/ready", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = sources_.ready();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "Ready\n" : "Not ready: waiting for a first round of every cluster\n",
                    "text/plain");
  });
  // The status page: the same data as /status, as HTML that needs no script and loads nothing.
  server_->Get("/", [this](const httplib::Request& req, httplib::Response& res) {
    for (const auto& [name, value] : StatusPageHeaders()) res.set_header(name, value);
    StatusPageOptions options;
    options.incidents = sources_.incident_events;
    options.auto_refresh = req.get_param_value("refresh") != "off";
    res.set_content(StatusHtmlFromJsonText(sources_.status(false), WallClock::now(), options),
                    "text/html; charset=utf-8");
  });
}

bool Exporter::Bind(const std::string& listen_address, std::string* error) {
  const auto colon = listen_address.rfind(':');
  if (colon == std::string::npos) {
    *error = "listen address \"" + listen_address + "\" is not host:port";
    return false;
  }
  std::string host = listen_address.substr(0, colon);
  if (host.empty()) host = "0.0.0.0";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  try {
    port = std::stoi(listen_address.substr(colon + 1));
  } catch (const std::exception&) {
    *error = "listen address \"" + listen_address + "\" has no numeric port";
    return false;
  }
  if (!tls_error_.empty()) {
    *error = tls_error_;
    return false;
  }
  if (port == 0) {
    port_ = server_->bind_to_any_port(host);
  } else if (server_->bind_to_port(host, port)) {
    port_ = port;
  }
  if (port_ <= 0) {
    *error = "cannot listen on " + listen_address + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

void Exporter::Start() {
  thread_ = std::thread([this] { server_->Serve(); });
}

void Exporter::Stop() {
  if (server_) server_->Shutdown();
  if (thread_.joinable()) thread_.join();
}

}  // namespace sbd
