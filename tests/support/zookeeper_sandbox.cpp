#include "tests/support/zookeeper_sandbox.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include "tests/support/files.h"
#include "tests/support/process.h"

namespace sbd::testing {
namespace {

// True when something accepts a TCP connection on 127.0.0.1:port.
bool Accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<uint16_t>(port));
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

ZooKeeperServer::ZooKeeperServer(const std::string& dir) : dir_(dir) {
  port_ = FreeLoopbackPort();
  Configure("");
  Start();
}

ZooKeeperServer::ZooKeeperServer(const std::string& dir, int client_port, int myid,
                                 const std::string& servers)
    : dir_(dir),
      main_class_("org.apache.zookeeper.server.quorum.QuorumPeerMain"),
      port_(client_port) {
  Configure(servers);
  WriteFile(dir_ + "/data/myid", std::to_string(myid) + "\n", 0644);
  Start();
}

void ZooKeeperServer::Configure(const std::string& extra) {
  RunCommand({"mkdir", "-p", dir_ + "/data"});
  log_file_ = dir_ + "/zookeeper.log";
  WriteFile(dir_ + "/zoo.cfg",
            "tickTime=200\ninitLimit=10\nsyncLimit=5\ndataDir=" + dir_ +
                "/data\nclientPort=" + std::to_string(port_) +
                "\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                "4lw.commands.whitelist=\nmaxClientCnxns=0\nmaxSessionTimeout=30000\n" +
                extra,
            0644);
}

ZooKeeperServer::~ZooKeeperServer() { Stop(); }

void ZooKeeperServer::Start() {
  if (pid_ > 0 && !ReapIfExited(pid_)) return;
  BackgroundOptions background;
  background.die_with_parent = true;
  pid_ = SpawnBackgroundProcess(
      {"/usr/bin/java", "-Xmx256m", "-XX:+UseSerialGC", "-Dzookeeper.log.dir=" + dir_, "-cp",
       "/usr/share/java/zookeeper.jar", main_class_, dir_ + "/zoo.cfg"},
      log_file_, background);
  std::string how;
  if (WaitUntilReady(
          pid_, [&] { return Accepts(port_); }, std::chrono::seconds(60),
          std::chrono::milliseconds(50), &how) != StartupOutcome::kReady) {
    StopChildProcess(pid_, SIGKILL, std::chrono::seconds(2));
    pid_ = -1;
    throw std::runtime_error("ZooKeeper did not start (" + how + "):\n" + LogTail());
  }
}

void ZooKeeperServer::Stop() {
  if (pid_ <= 0) return;
  StopChildProcess(pid_, SIGTERM, std::chrono::seconds(10));
  pid_ = -1;
}

std::string ZooKeeperServer::LogTail() const { return Tail(log_file_, 30); }

ZooKeeperEnsemble::ZooKeeperEnsemble(const std::string& dir) {
  constexpr int kServers = 3;
  std::vector<int> clients;
  std::string servers;
  for (int id = 1; id <= kServers; ++id) {
    clients.push_back(FreeLoopbackPort());
    servers += "server." + std::to_string(id) + "=127.0.0.1:" + std::to_string(FreeLoopbackPort()) +
               ":" + std::to_string(FreeLoopbackPort()) + "\n";
  }
  for (int id = 1; id <= kServers; ++id) {
    servers_.push_back(std::make_unique<ZooKeeperServer>(dir + "/zk" + std::to_string(id),
                                                         clients[id - 1], id, servers));
  }
  if (!Serving(60)) {
    throw std::runtime_error("the ZooKeeper ensemble did not serve:\n" + servers_[0]->LogTail());
  }
}

std::vector<std::string> ZooKeeperEnsemble::host_list() const {
  std::vector<std::string> hosts;
  for (const auto& server : servers_) hosts.push_back(server->host());
  return hosts;
}

std::string ZooKeeperEnsemble::hosts() const {
  std::string joined;
  for (const std::string& host : host_list()) joined += (joined.empty() ? "" : ",") + host;
  return joined;
}

bool ZooKeeperEnsemble::Serving(double timeout_s) const {
  const std::string script = "from kazoo.client import KazooClient\nc = KazooClient(hosts='" +
                             hosts() + "')\nc.start(timeout=" + std::to_string(timeout_s) +
                             ")\nc.get('/')\nc.stop()\n";
  const auto run = RunCommand({"/usr/bin/python3", "-c", script}, false,
                              std::chrono::seconds(static_cast<int>(timeout_s) + 30));
  return run.exit_code == 0;
}

ZooKeeperCandidate::ZooKeeperCandidate(const std::string& hosts, const std::string& path,
                                       const std::string& identifier, double session_timeout_s,
                                       const std::string& log_dir, int storage_port) {
  metrics_port_ = FreeLoopbackPort();
  log_file_ = log_dir + "/zk-candidate-" + identifier + ".log";
  BackgroundOptions background;
  background.die_with_parent = true;
  pid_ = SpawnBackgroundProcess(
      {"/usr/bin/python3", SBD_SOURCE_DIR "/tests/support/zk_candidate.py", "--hosts", hosts,
       "--path", path, "--identifier", identifier, "--session-timeout",
       std::to_string(session_timeout_s), "--metrics-port", std::to_string(metrics_port_),
       "--storage-port", std::to_string(storage_port)},
      log_file_, background);
  std::string how;
  if (WaitUntilReady(
          pid_, [&] { return !Metrics().empty(); }, std::chrono::seconds(20),
          std::chrono::milliseconds(50), &how) != StartupOutcome::kReady) {
    StopChildProcess(pid_, SIGKILL, std::chrono::seconds(2));
    throw std::runtime_error("kazoo candidate did not start (" + how + "):\n" +
                             Tail(log_file_, 20));
  }
}

ZooKeeperCandidate::~ZooKeeperCandidate() {
  ::kill(pid_, SIGCONT);
  StopChildProcess(pid_, SIGTERM, std::chrono::seconds(5));
}

void ZooKeeperCandidate::Freeze() const { ::kill(pid_, SIGSTOP); }
void ZooKeeperCandidate::Resume() const { ::kill(pid_, SIGCONT); }
void ZooKeeperCandidate::Resign() const { ::kill(pid_, SIGUSR1); }

std::string ZooKeeperCandidate::Metrics() const {
  httplib::Client client("127.0.0.1", metrics_port_);
  client.set_connection_timeout(std::chrono::milliseconds(500));
  client.set_read_timeout(std::chrono::milliseconds(500));
  auto result = client.Get("/metrics");
  if (!result || result->status != 200) return "";
  return result->body;
}

std::string ZooKeeperCandidate::ClaimedToken() const {
  const std::string text = Metrics();
  const std::string label = "token=\"";
  const auto at = text.find(label);
  if (at == std::string::npos) return "";
  const auto end = text.find("\"} ", at + label.size());
  if (end == std::string::npos || text.compare(end + 3, 1, "1") != 0) return "";
  return text.substr(at + label.size(), end - at - label.size());
}

}  // namespace sbd::testing
