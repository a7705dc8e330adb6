#include "tests/support/detector_process.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace sbd::testing {

DetectorProcess::DetectorProcess(const std::string& binary, const std::vector<std::string>& args,
                                 std::string log_path)
    : log_path_(std::move(log_path)) {
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<std::string> copy = args;
    std::string path = binary;
    std::vector<char*> argv = {path.data()};
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
}

DetectorProcess::~DetectorProcess() { Kill(); }

namespace {

size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

}  // namespace

bool DetectorProcess::Reload(std::chrono::seconds deadline) {
  const std::string kDone = "msg=\"config reloaded\"";
  const std::string kRefused = "msg=\"reload failed";
  const std::string before = Log();
  const size_t done = Occurrences(before, kDone);
  const size_t refused = Occurrences(before, kRefused);
  Signal(SIGHUP);
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    const std::string now = Log();
    if (Occurrences(now, kDone) > done) return true;
    if (Occurrences(now, kRefused) > refused) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

void DetectorProcess::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

void DetectorProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string DetectorProcess::Log() const {
  std::ifstream in(log_path_);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::unique_ptr<DetectorProcess> StartReadyDetector(const std::string& binary,
                                                    const std::string& config, int port,
                                                    const std::string& log_path) {
  auto detector = std::make_unique<DetectorProcess>(
      binary,
      std::vector<std::string>{"--config.file=" + config,
                               "--web.listen-address=127.0.0.1:" + std::to_string(port)},
      log_path);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (HttpGet(port, "/-/ready") != "Ready\n") {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("detector not ready:\n" + detector->Log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return detector;
}

nlohmann::json ClusterStatus(int port, const std::string& name) {
  const nlohmann::json status = nlohmann::json::parse(HttpGet(port, "/status"), nullptr, false);
  if (!status.is_object() || !status.contains("clusters")) return nullptr;
  for (const auto& c : status["clusters"]) {
    if (c.is_object() && c.value("name", "") == name) return c;
  }
  return nullptr;
}

std::string HttpGet(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  auto res = client.Get(path.c_str());
  return res && res->status == 200 ? res->body : "";
}

bool HasLine(const std::string& body, const std::string& line) {
  std::istringstream in(body);
  for (std::string l; std::getline(in, l);) {
    if (l == line) return true;
  }
  return false;
}

double MetricValue(const std::string& body, const std::string& series) {
  std::istringstream in(body);
  for (std::string l; std::getline(in, l);) {
    if (l.rfind(series + " ", 0) == 0) return std::stod(l.substr(series.size() + 1));
  }
  return -1;
}

std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string ReplaceFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  const std::string staged = WriteFile(dir, "." + name + ".new", text);
  if (std::rename(staged.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("rename " + staged + " to " + path + ": " + std::strerror(errno));
  }
  return path;
}

}  // namespace sbd::testing
