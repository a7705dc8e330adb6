#include "detector/exporter.h"

#include <crypt.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <cstring>

#include "detector/metrics.h"
#include "probes/http_json.h"

namespace sbd {
namespace {

std::string Where(const std::string& path, const YAML::Node& node, const std::string& key) {
  return path + ":" + std::to_string(node.Mark().line + 1) + ":" +
         std::to_string(node.Mark().column + 1) + ": " + key;
}

// Constant-time comparison, so a wrong password takes as long as a right one.
bool SameBytes(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::variant<WebConfig, std::vector<std::string>> LoadWebConfig(const std::string& path) {
  std::vector<std::string> errors;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return std::vector<std::string>{path + ":0:0: cannot read file: " + std::strerror(errno)};
  } catch (const YAML::ParserException& e) {
    return std::vector<std::string>{path + ":" + std::to_string(e.mark.line + 1) + ":" +
                                    std::to_string(e.mark.column + 1) + ": " + e.msg};
  }
  WebConfig web;
  if (root.IsNull()) return web;
  if (!root.IsMap()) return std::vector<std::string>{Where(path, root, "") + "expected a mapping"};
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>();
    const YAML::Node& value = entry.second;
    if (key == "tls_server_config" && value.IsMap()) {
      for (const auto& tls : value) {
        const std::string tls_key = tls.first.as<std::string>();
        std::string* target = tls_key == "cert_file"  ? &web.cert_file
                              : tls_key == "key_file" ? &web.key_file
                                                      : nullptr;
        if (target == nullptr) {
          errors.push_back(Where(path, tls.first, "tls_server_config." + tls_key) +
                           ": unknown key");
        } else if (!tls.second.IsScalar()) {
          errors.push_back(Where(path, tls.second, "tls_server_config." + tls_key) +
                           ": expected a string");
        } else {
          *target = tls.second.as<std::string>();
        }
      }
      if (web.cert_file.empty() != web.key_file.empty()) {
        errors.push_back(Where(path, value, "tls_server_config") +
                         ": cert_file and key_file go together");
      }
    } else if (key == "basic_auth_users" && value.IsMap()) {
      for (const auto& user : value) {
        const std::string hash = user.second.IsScalar() ? user.second.as<std::string>() : "";
        if (hash.rfind("$2", 0) != 0) {
          errors.push_back(
              Where(path, user.second, "basic_auth_users." + user.first.as<std::string>()) +
              ": expected a bcrypt hash");
          continue;
        }
        web.basic_auth_users.emplace_back(user.first.as<std::string>(), hash);
      }
    } else if (key == "tls_server_config" || key == "basic_auth_users") {
      errors.push_back(Where(path, value, key) + ": expected a mapping");
    } else {
      errors.push_back(Where(path, entry.first, key) + ": unknown key");
    }
  }
  if (!errors.empty()) return errors;
  return web;
}

Exporter::Exporter(Sources sources, WebConfig web)
    : sources_(std::move(sources)), web_(std::move(web)) {
  if (!web_.cert_file.empty()) {
    server_ = std::make_unique<httplib::SSLServer>(web_.cert_file.c_str(), web_.key_file.c_str());
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  Route();
}

Exporter::~Exporter() { Stop(); }

bool Exporter::Authorized(const std::string& header) const {
  if (web_.basic_auth_users.empty()) return true;
  const std::string prefix = "Basic ";
  if (header.rfind(prefix, 0) != 0) return false;
  const std::string decoded = Base64Decode(header.substr(prefix.size())).value_or("");
  const auto colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  const std::string user = decoded.substr(0, colon);
  const std::string password = decoded.substr(colon + 1);
  for (const auto& [name, hash] : web_.basic_auth_users) {
    if (name != user) continue;
    crypt_data data{};
    const char* computed = crypt_r(password.c_str(), hash.c_str(), &data);
    return computed != nullptr && SameBytes(computed, hash);
  }
  return false;
}

void Exporter::Route() {
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (Authorized(req.get_header_value("Authorization"))) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    res.status = 401;
    res.set_header("WWW-Authenticate", "Basic realm=\"splitbrain-detector\"");
    res.set_content("Unauthorized\n", "text/plain");
    return httplib::Server::HandlerResponse::Handled;
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
                    reply(res, sources_.add_declaration(req.body));
                  });
    server_->Delete(R"(/api/v1/declarations/([A-Za-z0-9_.\-]+))",
                    [this, reply](const httplib::Request& req, httplib::Response& res) {
                      reply(res, sources_.remove_declaration(req.matches[1]));
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
  server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        "<html><head><title>splitbrain-detector</title></head><body>"
        "<h1>splitbrain-detector</h1><ul><li><a href=\"metrics\">metrics</a></li>"
        "<li><a href=\"status?format=text\">status</a> (<a href=\"status\">json</a>)</li>"
        "<li><a href=\"-/healthy\">healthy</a></li><li><a href=\"-/ready\">ready</a></li>"
        "</ul></body></html>",
        "text/html");
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
  if (!server_->is_valid()) {
    *error = "cannot load TLS certificate " + web_.cert_file + " or key " + web_.key_file;
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
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

void Exporter::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace sbd
