#include "tests/support/pg_auto_failover_sandbox.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace sbd::testing {
namespace {

int Listen(const char* address, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address, &addr.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 64) != 0) {
    close(fd);
    throw std::runtime_error("forwarder: cannot listen on " + std::string(address) + ":" +
                             std::to_string(port));
  }
  return fd;
}

int Dial(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Copies both ways until either side closes.
void Pump(int a, int b) {
  char buffer[16384];
  pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  while (poll(fds, 2, -1) > 0) {
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0 || write(fds[1 - i].fd, buffer, static_cast<size_t>(n)) != n) {
        shutdown(a, SHUT_RDWR);
        shutdown(b, SHUT_RDWR);
        return;
      }
    }
  }
}

const char* kPgBinPath = "/usr/lib/postgresql/15/bin:/usr/bin:/bin";

}  // namespace

struct LoopbackForwarder::State {
  int port = 0;
  int listen_fd = -1;
  std::atomic<bool> stop{false};
  std::atomic<bool> cut{false};
  std::mutex mu;
  std::vector<int> live;
  std::vector<std::thread> pumps;
  std::thread acceptor;

  void Accept() {
    while (!stop) {
      pollfd p{listen_fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const int client = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      const int server = cut ? -1 : Dial(port);
      if (server < 0) {
        close(client);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu);
      live.push_back(client);
      live.push_back(server);
      pumps.emplace_back([client, server] { Pump(client, server); });
    }
  }
  void ShutdownLive() {
    std::lock_guard<std::mutex> lock(mu);
    for (int fd : live) shutdown(fd, SHUT_RDWR);
  }
};

LoopbackForwarder::LoopbackForwarder(int port, const std::string& address, int listen_port)
    : state_(std::make_shared<State>()), listen_port_(listen_port > 0 ? listen_port : port) {
  state_->port = port;
  state_->listen_fd = Listen(address.c_str(), listen_port_);
  state_->acceptor = std::thread([state = state_] { state->Accept(); });
}

LoopbackForwarder::~LoopbackForwarder() {
  state_->stop = true;
  state_->acceptor.join();
  state_->ShutdownLive();
  for (auto& pump : state_->pumps) pump.join();
  for (int fd : state_->live) close(fd);
  close(state_->listen_fd);
}

void LoopbackForwarder::Cut() {
  state_->cut = true;
  state_->ShutdownLive();
}

void LoopbackForwarder::Mend() { state_->cut = false; }

std::string PafNode::Dsn() const {
  return "host=127.0.0.1 port=" + std::to_string(port) + " user=postgres dbname=postgres";
}

PafFormation::PafFormation(int nodes) : root_(std::make_unique<TempDir>("sbd-paf-")) {
  dir_ = root_->path();
  monitor_port_ = FreeLoopbackPort();
  monitor_pid_ = SpawnAutoctl({"create", "monitor", "--pgdata", dir_ + "/monitor", "--pgport",
                               std::to_string(monitor_port_), "--hostname", "127.0.0.1", "--auth",
                               "trust", "--no-ssl", "--run"},
                              "monitor");
  if (!WaitFor([&] { return MonitorQuery("SELECT 1") == "1"; }, std::chrono::seconds(90),
               std::chrono::milliseconds(250))) {
    throw std::runtime_error("monitor not up:\n" + Log("monitor"));
  }
  // Seconds, not tens of seconds: health checks every second, unhealthy after two, and the
  // old primary given three to demote itself.
  for (const char* setting :
       {"health_check_period = 1000", "health_check_timeout = 1000", "health_check_max_retries = 1",
        "health_check_retry_delay = 500", "node_considered_unhealthy_timeout = 2000",
        "primary_demote_timeout = 3000"}) {
    MonitorQuery(std::string("ALTER SYSTEM SET pgautofailover.") + setting);
  }
  MonitorQuery("SELECT pg_reload_conf()");
  for (int i = 1; i <= nodes; ++i) {
    PafNode node;
    node.name = "node" + std::to_string(i);
    node.port = FreeLoopbackPort();
    node.pgdata = dir_ + "/" + node.name;
    node.forwarder = std::make_unique<LoopbackForwarder>(node.port);
    node.monitor_link =
        std::make_unique<LoopbackForwarder>(monitor_port_, "127.0.0.1", FreeLoopbackPort());
    const std::string link = "127.0.0.1:" + std::to_string(node.monitor_link->listen_port());
    node.pid = SpawnAutoctl(
        {"create", "postgres", "--pgdata", node.pgdata, "--pgport", std::to_string(node.port),
         "--hostname", "127.0.0.2", "--listen", "127.0.0.1", "--name", node.name, "--auth", "trust",
         "--no-ssl", "--monitor",
         "postgres://autoctl_node@" + link + "/pg_auto_failover?sslmode=disable", "--run"},
        node.name);
    nodes_.push_back(std::move(node));
    const std::string want = i == 1 ? "'single', 'wait_primary', 'primary'" : "'secondary'";
    const std::string sql = "SELECT count(*) FROM pgautofailover.node WHERE nodename = '" +
                            nodes_.back().name + "' AND reportedstate IN (" + want + ")";
    if (!WaitFor([&] { return MonitorQuery(sql) == "1"; }, std::chrono::seconds(120),
                 std::chrono::milliseconds(250))) {
      throw std::runtime_error(nodes_.back().name + " not up: " + States() + "\n" +
                               Log(nodes_.back().name));
    }
  }
  WaitSettled(std::chrono::seconds(60));
}

PafFormation::~PafFormation() {
  for (pid_t pid : frozen_) kill(pid, SIGCONT);
  for (auto& node : nodes_) StopChildProcess(node.pid, SIGTERM, std::chrono::seconds(30));
  if (monitor_pid_ > 0) StopChildProcess(monitor_pid_, SIGTERM, std::chrono::seconds(30));
}

pid_t PafFormation::SpawnAutoctl(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {"/usr/bin/env",
                                   std::string("PATH=") + kPgBinPath,
                                   "HOME=" + dir_,
                                   "XDG_CONFIG_HOME=" + dir_ + "/config",
                                   "XDG_DATA_HOME=" + dir_ + "/share",
                                   "pg_autoctl"};
  argv.insert(argv.end(), args.begin(), args.end());
  BackgroundOptions options;
  options.as_postgres = true;
  options.workdir = dir_;
  options.die_with_parent = true;
  return SpawnBackgroundProcess(argv, dir_ + "/" + log + ".log", options);
}

std::string PafFormation::Log(const std::string& name) const {
  std::ifstream in(dir_ + "/" + name + ".log");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
}

std::string PafFormation::MonitorDsn() const {
  return "host=127.0.0.1 port=" + std::to_string(monitor_port_) +
         " user=autoctl_node dbname=pg_auto_failover sslmode=disable";
}

PafNode& PafFormation::Node(const std::string& name) {
  for (auto& node : nodes_) {
    if (node.name == name) return node;
  }
  throw std::runtime_error("no node " + name);
}

std::string PafFormation::MonitorQuery(const std::string& sql) const {
  const CommandResult result =
      RunCommand(PsqlCommand({"-h", "127.0.0.1", "-p", std::to_string(monitor_port_), "-U",
                              "postgres", "-d", "pg_auto_failover", "-c", sql}),
                 true, std::chrono::seconds(10));
  if (result.exit_code != 0) return "";
  std::string out = result.output;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string PafFormation::Primary() const {
  return MonitorQuery(
      "SELECT nodename FROM pgautofailover.node WHERE goalstate = 'primary' AND "
      "reportedstate = 'primary'");
}

bool PafFormation::Settled() const {
  return MonitorQuery(
             "SELECT count(*) FILTER (WHERE goalstate = 'primary' AND reportedstate = 'primary') "
             "= 1 AND count(*) FILTER (WHERE goalstate = 'secondary' AND reportedstate = "
             "'secondary') = count(*) - 1 FROM pgautofailover.node") == "t";
}

void PafFormation::WaitSettled(std::chrono::seconds deadline) const {
  if (!WaitFor([&] { return Settled(); }, deadline, std::chrono::milliseconds(250))) {
    throw std::runtime_error("formation not settled: " + States());
  }
}

std::string PafFormation::States() const {
  return MonitorQuery(
      "SELECT string_agg(nodename || ':' || goalstate || '/' || reportedstate, ' ' ORDER BY "
      "nodeid) FROM pgautofailover.node");
}

CommandResult PafFormation::ShowState(std::chrono::seconds timeout) const {
  const std::vector<std::string> argv = {"/usr/bin/env",
                                         std::string("PATH=") + kPgBinPath,
                                         "HOME=" + dir_,
                                         "XDG_CONFIG_HOME=" + dir_ + "/config",
                                         "XDG_DATA_HOME=" + dir_ + "/share",
                                         "pg_autoctl",
                                         "show",
                                         "state",
                                         "--pgdata",
                                         dir_ + "/monitor"};
  return RunCommand(argv, true, timeout);
}

void PafFormation::Switchover() {
  std::vector<std::string> argv = {"/usr/bin/env",
                                   std::string("PATH=") + kPgBinPath,
                                   "HOME=" + dir_,
                                   "XDG_CONFIG_HOME=" + dir_ + "/config",
                                   "XDG_DATA_HOME=" + dir_ + "/share",
                                   "pg_autoctl",
                                   "perform",
                                   "switchover",
                                   "--pgdata",
                                   nodes_.front().pgdata};
  // The monitor's perform_failover() can lose a deadlock against a keeper's node_active() call
  // (PostgreSQL aborts one of the two transactions, nothing changed); pg_autoctl then exits
  // 6 with "deadlock detected", and the operator's answer is to ask again.
  for (int attempt = 1;; ++attempt) {
    const CommandResult result = RunCommand(argv, true, std::chrono::seconds(120));
    if (result.exit_code == 0) return;
    const bool deadlock = result.output.find("deadlock detected") != std::string::npos;
    if (!deadlock || attempt == 3) {
      throw std::runtime_error(DescribeCommandRun(argv, result.exit_code, result.output));
    }
    WaitSettled(std::chrono::seconds(60));
  }
}

void PafFormation::StopMonitor() {
  StopChildProcess(monitor_pid_, SIGTERM, std::chrono::seconds(30));
  monitor_pid_ = -1;
}

void PafFormation::StartMonitor() {
  monitor_pid_ = SpawnAutoctl({"run", "--pgdata", dir_ + "/monitor"}, "monitor");
  if (!WaitFor([&] { return MonitorQuery("SELECT 1") == "1"; }, std::chrono::seconds(60),
               std::chrono::milliseconds(250))) {
    throw std::runtime_error("monitor not back:\n" + Log("monitor"));
  }
}

void PafFormation::FreezeKeeper(const std::string& name) {
  for (pid_t pid : ProcessTree(Node(name).pid)) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string command;
    std::getline(comm, command);
    if (command.rfind("pg_autoctl", 0) != 0) continue;  // its PostgreSQL keeps serving
    if (kill(pid, SIGSTOP) == 0) frozen_.push_back(pid);
  }
}

void PafFormation::ThawKeeper(const std::string& name) {
  (void)name;
  for (pid_t pid : frozen_) kill(pid, SIGCONT);
  frozen_.clear();
}

}  // namespace sbd::testing
