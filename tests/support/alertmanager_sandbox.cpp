#include "tests/support/alertmanager_sandbox.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "tests/support/files.h"
#include "tests/support/process.h"

namespace sbd::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

std::string AlertmanagerBinary() {
  if (const char* env = std::getenv("SBD_ALERTMANAGER"); env != nullptr && *env != '\0') {
    return env;
  }
  if (::access("/usr/bin/prometheus-alertmanager", X_OK) == 0) {
    return "/usr/bin/prometheus-alertmanager";
  }
  return "alertmanager";
}

// --- WebhookReceiver -------------------------------------------------------------------------

WebhookReceiver::WebhookReceiver(const std::string& cert_file, const std::string& key_file)
    : tls_(!cert_file.empty()) {
  if (tls_) {
    server_ = std::make_unique<httplib::SSLServer>(cert_file.c_str(), key_file.c_str());
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (!server_->is_valid()) {
    throw std::runtime_error("WebhookReceiver: cannot load " + cert_file + " / " + key_file);
  }
  server_->Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
    Delivery d;
    d.at = std::chrono::steady_clock::now();
    d.wall = std::chrono::system_clock::now();
    d.body = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (d.body.is_discarded()) d.body = nullptr;
    d.path = req.path;
    d.authorization = req.get_header_value("Authorization");
    {
      std::lock_guard<std::mutex> lock(mu_);
      deliveries_.push_back(std::move(d));
    }
    cv_.notify_all();
    res.status = 200;
  });
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error(Errno("WebhookReceiver: cannot listen on 127.0.0.1"));
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  if (!::sbd::testing::WaitFor([this] { return server_->is_running(); }, milliseconds(10000),
                               milliseconds(5))) {
    server_->stop();
    thread_.join();
    throw std::runtime_error("WebhookReceiver: server thread did not start");
  }
}

WebhookReceiver::~WebhookReceiver() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string WebhookReceiver::url() const { return base_url() + "/webhook"; }

std::string WebhookReceiver::base_url() const {
  return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_);
}

std::vector<WebhookReceiver::Delivery> WebhookReceiver::Deliveries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deliveries_;
}

bool WebhookReceiver::WaitFor(std::function<bool(const Delivery&)> pred,
                              std::chrono::milliseconds deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  size_t checked = 0;  // deliveries already tested against pred
  return cv_.wait_for(lock, deadline, [&] {
    for (; checked < deliveries_.size(); ++checked) {
      if (pred(deliveries_[checked])) return true;
    }
    return false;
  });
}

std::optional<nlohmann::json> FiringAlert(const WebhookReceiver::Delivery& d,
                                          const std::string& alertname,
                                          const std::string& cluster) {
  if (!d.body.is_object() || !d.body.contains("alerts") || !d.body["alerts"].is_array()) {
    return std::nullopt;
  }
  for (const auto& a : d.body["alerts"]) {
    if (a["labels"].value("alertname", "") == alertname &&
        a["labels"].value("cluster", "") == cluster && a.value("status", "") == "firing") {
      return a;
    }
  }
  return std::nullopt;
}

std::pair<std::string, std::string> MakeLoopbackCertificate(const std::string& dir) {
  const std::string cert = dir + "/loopback.crt";
  const std::string key = dir + "/loopback.key";
  const std::vector<std::string> argv = {"openssl",  "req",
                                         "-x509",    "-newkey",
                                         "rsa:2048", "-nodes",
                                         "-days",    "2",
                                         "-subj",    "/CN=127.0.0.1",
                                         "-addext",  "subjectAltName=IP:127.0.0.1",
                                         "-keyout",  key,
                                         "-out",     cert};
  const CommandResult r = RunCommand(argv, false, seconds(60));
  if (r.exit_code != 0) {
    throw std::runtime_error("MakeLoopbackCertificate: " + FormatArgv(argv) + " exited " +
                             std::to_string(r.exit_code) + ":\n" + r.output);
  }
  return {cert, key};
}

// --- BlackHoleListener -----------------------------------------------------------------------

BlackHoleListener::BlackHoleListener() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(Errno("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 64) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string error = Errno("BlackHoleListener: bind/listen on 127.0.0.1");
    ::close(fd_);
    throw std::runtime_error(error);
  }
  port_ = ntohs(addr.sin_port);
}

BlackHoleListener::~BlackHoleListener() {
  if (fd_ >= 0) ::close(fd_);
}

// --- AlertmanagerServer ----------------------------------------------------------------------

AlertmanagerServer::AlertmanagerServer(const std::string& dir, const std::string& webhook_url,
                                       std::string group_wait, std::string group_interval,
                                       std::vector<std::string> peers, bool enable_cluster)
    : dir_(dir),
      config_file_(dir + "/alertmanager.yml"),
      log_file_(dir + "/alertmanager.log"),
      peers_(std::move(peers)),
      cluster_(enable_cluster || !peers_.empty()) {
  std::filesystem::create_directories(dir_ + "/data");
  std::ofstream config(config_file_, std::ios::trunc);
  config << "route:\n"
         << "  receiver: webhook\n"
         << "  group_by: ['alertname', 'cluster']\n"
         << "  group_wait: " << group_wait << "\n"
         << "  group_interval: " << group_interval << "\n"
         << "  repeat_interval: 1h\n"
         << "receivers:\n"
         << "  - name: webhook\n"
         << "    webhook_configs:\n"
         << "      - url: '" << webhook_url << "'\n"
         << "        send_resolved: true\n";
  config.close();
  if (!config) throw std::runtime_error("AlertmanagerServer: cannot write " + config_file_);
  Start();
}

AlertmanagerServer::~AlertmanagerServer() {
  try {
    Stop();
  } catch (...) {
  }
}

std::string AlertmanagerServer::cluster_address() const {
  return cluster_ ? "127.0.0.1:" + std::to_string(cluster_port_) : "";
}

void AlertmanagerServer::Start() {
  // A free port can be taken between FreeLoopbackPort() and the bind: retry with new ports.
  for (int attempt = 1;; ++attempt) {
    port_ = FreeLoopbackPort();
    std::vector<std::string> argv = {
        AlertmanagerBinary(), "--config.file=" + config_file_, "--storage.path=" + dir_ + "/data",
        "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=debug"};
    if (cluster_) {
      cluster_port_ = FreeLoopbackPort();
      argv.push_back("--cluster.listen-address=127.0.0.1:" + std::to_string(cluster_port_));
      argv.push_back("--cluster.peer-timeout=1s");
      for (const auto& peer : peers_) argv.push_back("--cluster.peer=" + peer);
    } else {
      argv.push_back("--cluster.listen-address=");
    }
    if (argv[0].find('/') == std::string::npos) {
      throw std::runtime_error("AlertmanagerServer: " + argv[0] +
                               " not found (set SBD_ALERTMANAGER)");
    }
    WriteFile(log_file_, "### " + FormatArgv(argv) + "\n", 0644, /*append=*/true);
    pid_ = SpawnBackgroundProcess(argv, log_file_);

    httplib::Client client("127.0.0.1", port_);
    client.set_connection_timeout(1, 0);
    client.set_read_timeout(2, 0);
    const StartupOutcome outcome = WaitUntilReady(
        pid_,
        [&] {
          auto res = client.Get("/-/ready");
          return res && res->status == 200;
        },
        milliseconds(30000), milliseconds(50));
    if (outcome == StartupOutcome::kReady) return;
    if (outcome == StartupOutcome::kExited) {
      pid_ = -1;
      if (attempt < 3 && LogTail(5).find("address already in use") != std::string::npos) {
        continue;
      }
      throw std::runtime_error("AlertmanagerServer: alertmanager exited during startup:\n" +
                               LogTail());
    }
    Stop();
    throw std::runtime_error("AlertmanagerServer: /-/ready not 200 within 30s:\n" + LogTail());
  }
}

void AlertmanagerServer::Stop() {
  if (pid_ <= 0) return;
  StopChildProcess(pid_, SIGTERM, milliseconds(10000), /*whole_group=*/true);
  pid_ = -1;
}

nlohmann::json AlertmanagerServer::Alerts() const {
  httplib::Client client("127.0.0.1", port_);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get("/api/v2/alerts");
  if (!res) {
    throw std::runtime_error("GET " + url() + "/api/v2/alerts: " + httplib::to_string(res.error()));
  }
  if (res->status != 200) {
    throw std::runtime_error("GET " + url() + "/api/v2/alerts: HTTP " +
                             std::to_string(res->status) + ": " + res->body);
  }
  return nlohmann::json::parse(res->body);
}

std::string AlertmanagerServer::LogTail(int lines) const { return Tail(log_file_, lines); }

bool Carries(const WebhookReceiver::Delivery& d, const std::string& alertname,
             const std::string& status) {
  if (!d.body.is_object() || !d.body.contains("alerts") || !d.body["alerts"].is_array()) {
    return false;
  }
  for (const auto& alert : d.body["alerts"]) {
    if (alert.is_object() && alert.contains("labels") && alert["labels"].is_object() &&
        alert["labels"].value("alertname", "") == alertname &&
        alert.value("status", "") == status) {
      return true;
    }
  }
  return false;
}

}  // namespace sbd::testing
