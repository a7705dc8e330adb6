#include "tests/support/patroni_sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <httplib.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace sbd::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

const milliseconds kEtcdReadyDeadline{30000};
const milliseconds kEtcdStopDeadline{15000};
const milliseconds kFirstLeaderDeadline{90000};
const milliseconds kPatroniStopDeadline{60000};
const milliseconds kSignalDeadline{5000};
constexpr int kLogTailLines = 30;

// ---------------------------------------------------------------------------------------------
// Small file and string helpers (the PgSandbox ones are private to pg_sandbox.cpp).

struct UserIds {
  uid_t uid;
  gid_t gid;
  std::string home;
  std::vector<gid_t> groups;
};

// The postgres OS user; only needed (and required) when running as root.
const UserIds& PostgresUser() {
  static const UserIds ids = [] {
    passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) {
      throw std::runtime_error(
          "PatroniCluster: running as root but there is no `postgres` OS user; install "
          "postgresql-15 (scripts/install-deps)");
    }
    UserIds u{pw->pw_uid, pw->pw_gid, pw->pw_dir != nullptr ? pw->pw_dir : "/", {}};
    int n = 64;
    u.groups.resize(static_cast<size_t>(n));
    if (::getgrouplist("postgres", u.gid, u.groups.data(), &n) < 0) {
      u.groups.resize(static_cast<size_t>(n));
      ::getgrouplist("postgres", u.gid, u.groups.data(), &n);
    }
    u.groups.resize(static_cast<size_t>(std::max(n, 0)));
    return u;
  }();
  return ids;
}

void GiveToPostgres(const std::string& path) {
  if (!RunningAsRoot()) return;
  const auto& ids = PostgresUser();
  if (::chown(path.c_str(), ids.uid, ids.gid) != 0) {
    throw std::runtime_error("chown " + path + ": " + strerror(errno));
  }
}

void MakeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0) {
    throw std::runtime_error("mkdir " + path + ": " + strerror(errno));
  }
  ::chmod(path.c_str(), mode);  // not subject to the umask
}

void WriteFile(const std::string& path, const std::string& content, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw std::runtime_error("open " + path + ": " + strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw std::runtime_error("write " + path + ": " + strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  ::fchmod(fd, mode);
  ::close(fd);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string Tail(const std::string& path, int lines) {
  std::string log = ReadFile(path);
  if (log.empty()) return "(" + path + " is empty or missing)\n";
  size_t pos = log.size();
  if (log.back() == '\n') --pos;
  int seen = 0;
  while (pos > 0) {
    size_t nl = log.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      pos = 0;
      break;
    }
    if (++seen >= lines) {
      pos = nl + 1;
      break;
    }
    pos = nl;
  }
  std::string tail = log.substr(pos);
  if (tail.back() != '\n') tail += '\n';
  return tail;
}

std::string Base64Encode(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                 (static_cast<unsigned char>(in[i + 1]) << 8) |
                 static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i + 1 == in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    unsigned v =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string Base64Decode(const std::string& in) {
  std::string out;
  unsigned v = 0;
  int bits = 0;
  for (char c : in) {
    int d;
    if (c >= 'A' && c <= 'Z') {
      d = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      d = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      d = c - '0' + 52;
    } else if (c == '+' || c == '-') {
      d = 62;
    } else if (c == '/' || c == '_') {
      d = 63;
    } else {
      continue;  // padding, whitespace
    }
    v = (v << 6) | static_cast<unsigned>(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((v >> bits) & 0xFF);
    }
  }
  return out;
}

// The smallest key greater than every key starting with `prefix` (etcd's range_end for a prefix).
std::string PrefixRangeEnd(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char last = static_cast<unsigned char>(prefix.back());
    if (last < 0xFF) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

// Looks `name` up in $PATH and the usual system directories; `name` itself if not found.
std::string FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/bin:/bin:/usr/local/bin:/usr/sbin:/sbin";
  if (const char* env = std::getenv("PATH"); env != nullptr && *env != '\0') {
    path += ":" + std::string(env);
  }
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

// Patroni's own programs: $SBD_PATRONI_BINDIR/<tool> when set, else found in PATH.
std::string PatroniBin(const std::string& tool) {
  if (const char* env = std::getenv("SBD_PATRONI_BINDIR"); env != nullptr && *env != '\0') {
    return std::string(env) + "/" + tool;
  }
  return FindProgram(tool);
}

// fork/exec of a long-running daemon with stdin from /dev/null and stdout+stderr appended to
// `log_file`, in its own process group, with a minimal environment. With `as_postgres` (and root)
// the child switches to the postgres user itself (no runuser), so the returned pid is the daemon.
// The child gets SIGTERM when the calling thread exits (PR_SET_PDEATHSIG).
pid_t SpawnDaemon(const std::vector<std::string>& argv_in, const std::string& log_file,
                  bool as_postgres, const std::string& workdir) {
  if (argv_in.empty()) throw std::invalid_argument("SpawnDaemon: empty argv");
  const bool switch_user = as_postgres && RunningAsRoot();
  std::string home = "/";
  if (switch_user) {
    home = PostgresUser().home;
  } else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    home = h;
  }
  std::string user = "postgres";
  if (!switch_user) {
    passwd* pw = ::getpwuid(::geteuid());
    user = pw != nullptr ? pw->pw_name : "nobody";
  }
  std::vector<std::string> env = {
      "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
      "HOME=" + home,
      "USER=" + user,
      "LOGNAME=" + user,
      "LANG=C.UTF-8",
      "PYTHONUNBUFFERED=1",
      "PYTHONFAULTHANDLER=1"};
  if (const char* tz = std::getenv("TZ"); tz != nullptr) env.push_back(std::string("TZ=") + tz);

  std::vector<std::string> argv = argv_in;
  argv[0] = FindProgram(argv[0]);
  if (::access(argv[0].c_str(), X_OK) != 0) {
    throw std::runtime_error("SpawnDaemon: program not found or not executable: " + argv_in[0]);
  }
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const std::string exec_error = "SpawnDaemon: failed to exec " + argv[0] + "\n";
  const std::string setuid_error = "SpawnDaemon: failed to switch to the postgres user\n";
  std::vector<gid_t> groups;
  uid_t uid = 0;
  gid_t gid = 0;
  if (switch_user) {
    groups = PostgresUser().groups;
    uid = PostgresUser().uid;
    gid = PostgresUser().gid;
  }

  int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (log_fd < 0) throw std::runtime_error("open " + log_file + ": " + strerror(errno));
  if (switch_user) {
    if (::fchown(log_fd, uid, gid) != 0) {
      int e = errno;
      ::close(log_fd);
      throw std::runtime_error("chown " + log_file + ": " + strerror(e));
    }
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    int e = errno;
    ::close(log_fd);
    throw std::runtime_error(std::string("open /dev/null: ") + strerror(e));
  }
  const pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(log_fd);
    ::close(null_fd);
    throw std::runtime_error(std::string("fork: ") + strerror(e));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) ::signal(sig, SIG_DFL);
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
#ifdef SYS_close_range
    if (::syscall(SYS_close_range, 3U, ~0U, 0) != 0)
#endif
    {
      for (int fd = 3; fd < 65536; ++fd) ::close(fd);
    }
    if (switch_user) {
      if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 ||
          ::setuid(uid) != 0) {
        ssize_t ignored = ::write(2, setuid_error.data(), setuid_error.size());
        (void)ignored;
        _exit(126);
      }
    }
    // After the credential change, which clears it.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) _exit(1);
    if (::chdir(workdir.c_str()) != 0 && ::chdir("/") != 0) _exit(127);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ssize_t ignored = ::write(2, exec_error.data(), exec_error.size());
    (void)ignored;
    _exit(127);
  }
  ::setpgid(pid, pid);
  ::close(log_fd);
  ::close(null_fd);
  return pid;
}

// Non-blocking reap. True (and the exit description) when `pid` has exited or is not our child.
bool Reaped(pid_t pid, std::string* how = nullptr) {
  if (pid <= 0) return true;
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return false;
    if (r < 0) {
      if (how != nullptr) *how = "not a child any more";
      return true;
    }
    if (how != nullptr) {
      if (WIFEXITED(status)) {
        *how = "exited with status " + std::to_string(WEXITSTATUS(status));
      } else if (WIFSIGNALED(status)) {
        *how = "killed by signal " + std::to_string(WTERMSIG(status));
      } else {
        *how = "ended";
      }
    }
    return true;
  }
}

// SIGCONT + `sig`, wait for the exit (deadline), then SIGKILL the process group. Never throws.
void TerminateChild(pid_t pid, int sig, milliseconds deadline) {
  if (pid <= 0) return;
  ::kill(pid, SIGCONT);
  ::kill(pid, sig);
  if (WaitFor([&] { return Reaped(pid); }, deadline, milliseconds(20))) return;
  ::kill(-pid, SIGCONT);
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

bool IsAlive(pid_t pid) {
  char st = ProcessState(pid);
  return st != '\0' && st != 'Z';
}

std::unique_ptr<httplib::Client> LoopbackClient(int port, int read_timeout_ms = 3000) {
  auto cli = std::make_unique<httplib::Client>("127.0.0.1", port);
  cli->set_connection_timeout(0, 1000 * 1000);
  cli->set_read_timeout(read_timeout_ms / 1000, (read_timeout_ms % 1000) * 1000);
  cli->set_write_timeout(3, 0);
  cli->set_keep_alive(false);
  return cli;
}

std::string Quoted(const std::string& s) {  // YAML single-quoted scalar
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ScopedTempDir

ScopedTempDir::ScopedTempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + tmpl + ": " + strerror(errno));
  }
  path_ = buf.data();
  ::chmod(path_.c_str(), 0755);
  try {
    GiveToPostgres(path_);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(path_, ec);
    throw;
  }
}

ScopedTempDir::~ScopedTempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

// ---------------------------------------------------------------------------------------------
// EtcdServer

EtcdServer::EtcdServer(const std::string& dir)
    : dir_(dir), data_dir_(dir + "/data"), log_file_(dir + "/etcd.log") {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw std::runtime_error("EtcdServer: cannot create " + dir_ + ": " + ec.message());
  client_port_ = FreeLoopbackPort();
  do {
    peer_port_ = FreeLoopbackPort();
  } while (peer_port_ == client_port_);

  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    const size_t log_offset = ReadFile(log_file_).size();
    Spawn();
    std::string how;
    bool exited = false;
    bool ready = WaitFor(
        [&] {
          if (Reaped(pid_, &how)) {
            exited = true;
            return true;
          }
          return Ready();
        },
        kEtcdReadyDeadline, milliseconds(50));
    if (ready && !exited) return;
    if (!exited) TerminateChild(pid_, SIGTERM, kEtcdStopDeadline);
    pid_ = -1;
    const std::string new_log = ReadFile(log_file_).substr(log_offset);
    if (exited && new_log.find("address already in use") != std::string::npos &&
        attempt < kAttempts) {
      fs::remove_all(data_dir_, ec);
      client_port_ = FreeLoopbackPort();
      do {
        peer_port_ = FreeLoopbackPort();
      } while (peer_port_ == client_port_);
      continue;
    }
    throw std::runtime_error("EtcdServer: etcd on 127.0.0.1:" + std::to_string(client_port_) +
                             (exited
                                  ? " " + how
                                  : std::string(" is not ready after ") +
                                        std::to_string(kEtcdReadyDeadline.count() / 1000) + " s") +
                             "\n--- last lines of " + log_file_ + " ---\n" + LogTail());
  }
}

EtcdServer::~EtcdServer() {
  try {
    Stop();
  } catch (...) {
  }
}

std::string EtcdServer::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(client_port_);
}

void EtcdServer::Spawn() {
  const std::string client_url = endpoint();
  const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer_port_);
  pid_ = SpawnDaemon({"etcd",
                      "--name",
                      "sbd-etcd",
                      "--data-dir",
                      data_dir_,
                      "--listen-client-urls",
                      client_url,
                      "--advertise-client-urls",
                      client_url,
                      "--listen-peer-urls",
                      peer_url,
                      "--initial-advertise-peer-urls",
                      peer_url,
                      "--initial-cluster",
                      "sbd-etcd=" + peer_url,
                      "--initial-cluster-state",
                      "new",
                      "--initial-cluster-token",
                      "sbd-test",
                      "--logger",
                      "zap",
                      "--log-outputs",
                      "stderr"},
                     log_file_, /*as_postgres=*/false, dir_);
}

bool EtcdServer::Ready() const {
  try {
    auto cli = LoopbackClient(client_port_, 2000);
    auto res = cli->Get("/health");
    if (!res || res->status != 200) return false;
    json health = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (!health.is_object() || health.value("health", "") != "true") return false;
    PostV3("kv/range", R"({"key":")" + Base64Encode("/") + R"("})");
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

void EtcdServer::Stop() {
  if (pid_ <= 0) return;
  TerminateChild(pid_, SIGTERM, kEtcdStopDeadline);
  pid_ = -1;
}

void EtcdServer::Start() {
  if (pid_ > 0) {
    if (!Reaped(pid_)) return;
    pid_ = -1;
  }
  Spawn();
  std::string how;
  bool exited = false;
  bool ready = WaitFor(
      [&] {
        if (Reaped(pid_, &how)) {
          exited = true;
          return true;
        }
        return Ready();
      },
      kEtcdReadyDeadline, milliseconds(50));
  if (ready && !exited) return;
  if (!exited) TerminateChild(pid_, SIGTERM, kEtcdStopDeadline);
  pid_ = -1;
  throw std::runtime_error("EtcdServer: restart on 127.0.0.1:" + std::to_string(client_port_) +
                           " failed (" + (exited ? how : std::string("not ready")) +
                           ")\n--- last lines of " + log_file_ + " ---\n" + LogTail());
}

std::string EtcdServer::PostV3(const std::string& api, const std::string& json_body) const {
  auto cli = LoopbackClient(client_port_);
  auto res = cli->Post(("/v3/" + api).c_str(), json_body, "application/json");
  if (!res) {
    throw std::runtime_error("etcd POST /v3/" + api + ": " + httplib::to_string(res.error()));
  }
  if (res->status != 200) {
    throw std::runtime_error("etcd POST /v3/" + api + ": HTTP " + std::to_string(res->status) +
                             ": " + res->body);
  }
  return res->body;
}

std::string EtcdServer::Get(const std::string& key) const {
  json body = json::parse(PostV3("kv/range", json{{"key", Base64Encode(key)}}.dump()));
  if (!body.contains("kvs") || body["kvs"].empty()) return "";
  return Base64Decode(body["kvs"][0].value("value", ""));
}

std::string EtcdServer::LogTail(int lines) const { return Tail(log_file_, lines); }

// ---------------------------------------------------------------------------------------------
// PatroniMember

std::string PatroniMember::RestUrl() const {
  return "http://127.0.0.1:" + std::to_string(rest_port);
}

std::string PatroniMember::MonitorDsn() const {
  return "host=127.0.0.1 port=" + std::to_string(pg_port) +
         " user=" + PatroniCluster::kMonitorUser + " dbname=postgres";
}

std::string PatroniMember::SuperuserDsn() const {
  return "host=127.0.0.1 port=" + std::to_string(pg_port) + " user=postgres dbname=postgres";
}

// ---------------------------------------------------------------------------------------------
// PatroniCluster

PatroniCluster::PatroniCluster(const std::string& root_dir, const std::string& scope,
                               const EtcdServer& etcd, int members, int ttl_seconds,
                               int loop_wait_seconds, int retry_timeout_seconds)
    : root_dir_(root_dir),
      scope_(scope),
      etcd_(etcd),
      ttl_(ttl_seconds),
      loop_wait_(loop_wait_seconds),
      retry_timeout_(retry_timeout_seconds) {
  static const std::regex kValidScope("[A-Za-z0-9_-]{1,40}");
  if (!std::regex_match(scope_, kValidScope)) {
    throw std::invalid_argument("PatroniCluster: invalid scope '" + scope_ +
                                "' (1-40 characters of [A-Za-z0-9_-])");
  }
  if (members < 1 || members > 9) {
    throw std::invalid_argument("PatroniCluster: members must be 1..9");
  }
  if (loop_wait_ < 1 || retry_timeout_ < 1 || loop_wait_ + 2 * retry_timeout_ > ttl_) {
    throw std::invalid_argument(
        "PatroniCluster: Patroni requires loop_wait + 2 * retry_timeout <= ttl (got ttl=" +
        std::to_string(ttl_) + " loop_wait=" + std::to_string(loop_wait_) +
        " retry_timeout=" + std::to_string(retry_timeout_) + ")");
  }
  if (!etcd_.running()) throw std::invalid_argument("PatroniCluster: etcd is not running");
  if (::access(PatroniBin("patroni").c_str(), X_OK) != 0) {
    throw std::runtime_error("PatroniCluster: patroni not found (PATH or $SBD_PATRONI_BINDIR)");
  }
  if (RunningAsRoot()) PostgresUser();

  try {
    std::error_code ec;
    if (!fs::exists(root_dir_)) {
      fs::create_directories(root_dir_, ec);
      if (ec) throw std::runtime_error("cannot create " + root_dir_ + ": " + ec.message());
      ::chmod(root_dir_.c_str(), 0755);
      GiveToPostgres(root_dir_);
      created_dirs_.push_back(root_dir_);
    }
    password_file_ = root_dir_ + "/" + scope_ + "-monitor.password";
    WriteFile(password_file_, std::string(kMonitorPassword) + "\n", 0600);

    std::set<int> used = {etcd_.client_port(), etcd_.peer_port(), 5432, 8008};
    auto port = [&] {
      for (;;) {
        int p = FreeLoopbackPort();
        if (used.insert(p).second) return p;
      }
    };
    for (int i = 1; i <= members; ++i) {
      PatroniMember m;
      m.name = "node" + std::to_string(i);
      m.pg_port = port();
      m.rest_port = port();
      m.dir = root_dir_ + "/" + scope_ + "-" + m.name;
      m.data_dir = m.dir + "/data";
      m.config_file = m.dir + "/patroni.yml";
      m.log_file = m.dir + "/patroni.log";
      // PostgreSQL's unix socket lives in the member dir: sun_path holds 107 characters.
      if (m.dir.size() + std::strlen("/.s.PGSQL.65535") > 107) {
        throw std::invalid_argument("root_dir too long for a unix socket path: " + m.dir);
      }
      if (fs::exists(m.dir)) {
        throw std::runtime_error("member dir " + m.dir + " already exists");
      }
      MakeDir(m.dir, 0755);
      created_dirs_.push_back(m.dir);
      GiveToPostgres(m.dir);
      members_.push_back(m);
    }
    for (const auto& m : members_) WriteConfig(m);

    // node1 bootstraps the cluster alone, so that it is always the initial leader.
    StartPatroni(members_.front());
    const std::string first = members_.front().name;
    std::string last;
    bool leader = WaitFor(
        [&] {
          std::string how;
          if (Reaped(members_.front().patroni_pid, &how)) {
            members_.front().patroni_pid = -1;
            Fail("patroni " + first + " " + how + " during bootstrap");
          }
          try {
            last = etcd_.Get(KeyPrefix() + "leader");
            if (last != first) return false;
            std::string out;
            return TryQuery(first, "SELECT pg_is_in_recovery()", &out, seconds(5)) && out == "f";
          } catch (const std::exception& e) {
            last = e.what();
            return false;
          }
        },
        kFirstLeaderDeadline, milliseconds(200));
    if (!leader) {
      Fail(first + " did not become the leader within " +
           std::to_string(kFirstLeaderDeadline.count() / 1000) + " s (etcd leader key: '" + last +
           "')");
    }
    for (size_t i = 1; i < members_.size(); ++i) StartPatroni(members_[i]);
  } catch (...) {
    StopAll();
    throw;
  }
}

PatroniCluster::~PatroniCluster() { StopAll(); }

std::string PatroniCluster::KeyPrefix() const {
  return std::string(kNamespace) + "/" + scope_ + "/";
}

void PatroniCluster::WriteConfig(const PatroniMember& m) const {
  const std::string rest = "127.0.0.1:" + std::to_string(m.rest_port);
  const std::string pg = "127.0.0.1:" + std::to_string(m.pg_port);
  std::ostringstream y;
  y << "# written by the splitbrain-detector test sandbox (tests/support/patroni_sandbox.cpp)\n"
    << "scope: " << Quoted(scope_) << "\n"
    << "namespace: " << kNamespace << "\n"
    << "name: " << Quoted(m.name) << "\n"
    << "log:\n"
    << "  level: INFO\n"
    << "restapi:\n"
    << "  listen: " << rest << "\n"
    << "  connect_address: " << rest << "\n"
    << "etcd3:\n"
    << "  hosts: 127.0.0.1:" << etcd_.client_port() << "\n"
    << "  protocol: http\n"
    << "bootstrap:\n"
    << "  dcs:\n"
    << "    ttl: " << ttl_ << "\n"
    << "    loop_wait: " << loop_wait_ << "\n"
    << "    retry_timeout: " << retry_timeout_ << "\n"
    << "    maximum_lag_on_failover: 1048576\n"
    << "    postgresql:\n"
    << "      use_pg_rewind: true\n"
    << "      parameters:\n"
    << "        wal_level: replica\n"
    << "        hot_standby: 'on'\n"
    << "        max_wal_senders: 10\n"
    << "        max_replication_slots: 10\n"
    << "        wal_log_hints: 'on'\n"
    << "        fsync: 'off'\n"
    << "  initdb:\n"
    << "  - encoding: UTF8\n"
    << "  - data-checksums\n"
    << "postgresql:\n"
    << "  listen: " << pg << "\n"
    << "  connect_address: " << pg << "\n"
    << "  data_dir: " << Quoted(m.data_dir) << "\n"
    << "  bin_dir: " << Quoted(PgBinDir()) << "\n"
    << "  pgpass: " << Quoted(m.dir + "/pgpass") << "\n"
    << "  authentication:\n"
    << "    superuser:\n"
    << "      username: postgres\n"
    << "      password: 'sbd-superuser-secret'\n"
    << "    replication:\n"
    << "      username: replicator\n"
    << "      password: 'sbd-replicator-secret'\n"
    << "  parameters:\n"
    << "    unix_socket_directories: " << Quoted(m.dir) << "\n"
    << "    shared_buffers: 32MB\n"
    << "    min_wal_size: 32MB\n"
    << "    max_wal_size: 64MB\n"
    << "    wal_recycle: 'off'\n"
    << "    log_line_prefix: '%m [%p] %q%u@%d '\n"
    << "  pg_hba:\n"
    << "  - local all all trust\n"
    << "  - host replication replicator 127.0.0.1/32 trust\n"
    << "  - host all postgres 127.0.0.1/32 trust\n"
    << "  - host all replicator 127.0.0.1/32 trust\n"
    << "  - host all all 127.0.0.1/32 scram-sha-256\n"
    << "tags: {}\n";
  WriteFile(m.config_file, y.str(), 0600);
  GiveToPostgres(m.config_file);
}

void PatroniCluster::StartPatroni(PatroniMember& m) {
  if (m.patroni_pid > 0 && !Reaped(m.patroni_pid)) return;
  m.frozen = false;
  m.patroni_pid = SpawnDaemon({PatroniBin("patroni"), m.config_file}, m.log_file,
                              /*as_postgres=*/true, m.dir);
}

PatroniMember& PatroniCluster::member(const std::string& name) {
  for (auto& m : members_) {
    if (m.name == name) return m;
  }
  throw std::invalid_argument("PatroniCluster " + scope_ + ": no member '" + name + "'");
}

const PatroniMember& PatroniCluster::member(const std::string& name) const {
  return const_cast<PatroniCluster*>(this)->member(name);
}

std::string PatroniCluster::RestGet(const std::string& name, const std::string& path) const {
  const PatroniMember& m = member(name);
  auto cli = LoopbackClient(m.rest_port);
  const std::string target = "/" + path;
  auto res = cli->Get(target.c_str());
  if (!res) {
    throw std::runtime_error("GET " + m.RestUrl() + target + ": " +
                             httplib::to_string(res.error()));
  }
  return res->body;
}

std::string PatroniCluster::Leader() const {
  for (const auto& m : members_) {
    if (m.frozen || m.patroni_pid <= 0) continue;
    try {
      json cluster = json::parse(RestGet(m.name, "cluster"));
      for (const auto& mem : cluster.at("members")) {
        const std::string role = mem.value("role", "");
        if (role == "leader" || role == "standby_leader" || role == "master") {
          return mem.value("name", "");
        }
      }
      return "";
    } catch (const std::exception&) {
      // Try the next member.
    }
  }
  try {
    return etcd_.Get(KeyPrefix() + "leader");
  } catch (const std::exception&) {
    return "";
  }
}

bool PatroniCluster::TryQuery(const std::string& name, const std::string& sql, std::string* out,
                              seconds timeout) const {
  const PatroniMember& m = member(name);
  const std::vector<std::string> argv = {PgBin("psql"),
                                         "-X",
                                         "-A",
                                         "-t",
                                         "-q",
                                         "-v",
                                         "ON_ERROR_STOP=1",
                                         "-h",
                                         m.dir,
                                         "-p",
                                         std::to_string(m.pg_port),
                                         "-U",
                                         "postgres",
                                         "-d",
                                         "postgres",
                                         "-c",
                                         sql};
  SplitCommandResult r = RunCommandSplit(argv, /*as_postgres=*/true, timeout);
  if (r.exit_code != 0) {
    if (out != nullptr) {
      *out = "$ " + FormatArgv(argv) + "\n" +
             (r.exit_code == -1 ? std::string("(timed out)")
                                : "(exit " + std::to_string(r.exit_code) + ")") +
             "\n" + r.err + r.out;
    }
    return false;
  }
  if (out != nullptr) *out = Trim(r.out);
  return true;
}

std::string PatroniCluster::Query(const std::string& name, const std::string& sql,
                                  seconds timeout) const {
  std::string out;
  if (!TryQuery(name, sql, &out, timeout)) {
    throw std::runtime_error("[" + scope_ + "/" + name + "] query failed: " + sql + "\n" + out +
                             "\n--- last lines of " + member(name).log_file + " ---\n" +
                             Tail(member(name).log_file, kLogTailLines));
  }
  return out;
}

bool PatroniCluster::Healthy(std::string* why) const {
  for (const auto& m : members_) {
    if (m.frozen) {
      *why = m.name + " is frozen";
      return false;
    }
    if (m.patroni_pid <= 0) {
      *why = m.name + " has no patroni process";
      return false;
    }
  }
  json cluster;
  std::string errors;
  for (const auto& m : members_) {
    try {
      cluster = json::parse(RestGet(m.name, "cluster"));
      break;
    } catch (const std::exception& e) {
      errors += m.name + ": " + e.what() + "; ";
    }
  }
  if (cluster.is_null()) {
    *why = "no member answered GET /cluster: " + errors;
    return false;
  }
  const json& list = cluster.value("members", json::array());
  if (list.size() != members_.size()) {
    *why = "GET /cluster lists " + std::to_string(list.size()) + " members: " + cluster.dump();
    return false;
  }
  std::string leader;
  for (const auto& mem : list) {
    const std::string role = mem.value("role", "");
    const std::string state = mem.value("state", "");
    if (role == "leader") {
      if (!leader.empty() || state != "running") {
        *why = "leader not unique or not running: " + cluster.dump();
        return false;
      }
      leader = mem.value("name", "");
    } else if (role != "replica" || (state != "streaming" && state != "running")) {
      *why = "member not a running replica: " + mem.dump();
      return false;
    }
  }
  if (leader.empty()) {
    *why = "no leader: " + cluster.dump();
    return false;
  }
  std::string out;
  if (!TryQuery(leader, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'", &out,
                seconds(10))) {
    *why = "query on leader " + leader + " failed: " + out;
    return false;
  }
  if (out != std::to_string(members_.size() - 1)) {
    *why = "leader " + leader + " has " + out + " streaming replicas";
    return false;
  }
  return true;
}

void PatroniCluster::EnsureMonitorRole() {
  const std::string leader = Leader();
  if (leader.empty()) Fail("EnsureMonitorRole: no leader");
  const std::string user = kMonitorUser;
  const std::string pass = kMonitorPassword;
  Query(leader, "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '" + user +
                    "') THEN CREATE ROLE " + user + " LOGIN; END IF; END$$;");
  Query(leader, "ALTER ROLE " + user + " LOGIN PASSWORD '" + pass + "'");
  Query(leader, "SET client_min_messages = warning; GRANT pg_monitor TO " + user + ";");
  Query(leader,
        "GRANT EXECUTE ON FUNCTION pg_control_system(), pg_control_checkpoint() TO " + user);
}

void PatroniCluster::WaitHealthy(seconds deadline) {
  const auto end = Clock::now() + deadline;
  auto left = [&] {
    return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(end - Clock::now()));
  };
  std::string why;
  bool healthy = WaitFor(
      [&] {
        for (auto& m : members_) {
          std::string how;
          if (m.patroni_pid > 0 && Reaped(m.patroni_pid, &how)) {
            m.patroni_pid = -1;
            Fail("patroni " + m.name + " " + how);
          }
        }
        return Healthy(&why);
      },
      left(), milliseconds(200));
  if (!healthy) {
    Fail("cluster not healthy after " + std::to_string(deadline.count()) + " s: " + why);
  }
  if (monitor_role_ready_) return;

  EnsureMonitorRole();
  // The role replicates; check it the way the detector uses it: TCP, SCRAM, password.
  std::string last;
  bool works = WaitFor(
      [&] {
        for (const auto& m : members_) {
          const std::vector<std::string> argv = {
              PgBin("psql"),
              "-X",
              "-A",
              "-t",
              "-q",
              "-v",
              "ON_ERROR_STOP=1",
              "-d",
              m.MonitorDsn() + " password=" + kMonitorPassword + " connect_timeout=5",
              "-c",
              "SELECT current_user, system_identifier FROM pg_control_system();"
              "SELECT checkpoint_lsn FROM pg_control_checkpoint();"};
          SplitCommandResult r = RunCommandSplit(argv, /*as_postgres=*/true, seconds(15));
          if (r.exit_code != 0 || r.out.find(kMonitorUser) == std::string::npos) {
            last = m.name + ": " + r.err + r.out;
            return false;
          }
        }
        return true;
      },
      std::max(left(), milliseconds(10000)), milliseconds(200));
  if (!works) Fail("monitoring role does not work on every member: " + last);
  monitor_role_ready_ = true;
}

void PatroniCluster::FreezePatroni(const std::string& name) {
  PatroniMember& m = member(name);
  if (m.patroni_pid <= 0) Fail("FreezePatroni(" + name + "): patroni is not running");
  if (::kill(m.patroni_pid, SIGSTOP) != 0) {
    Fail("kill -STOP " + std::to_string(m.patroni_pid) + ": " + strerror(errno));
  }
  m.frozen = true;
  if (!WaitFor([&] { return ProcessState(m.patroni_pid) == 'T'; }, kSignalDeadline,
               milliseconds(5))) {
    Fail("patroni " + name + " did not stop on SIGSTOP");
  }
}

void PatroniCluster::ThawPatroni(const std::string& name) {
  PatroniMember& m = member(name);
  if (m.patroni_pid <= 0) {
    m.frozen = false;
    return;
  }
  ::kill(m.patroni_pid, SIGCONT);
  m.frozen = false;
  if (!WaitFor([&] { return ProcessState(m.patroni_pid) != 'T'; }, kSignalDeadline,
               milliseconds(5))) {
    Fail("patroni " + name + " did not continue on SIGCONT");
  }
}

std::string PatroniCluster::Switchover(const std::string& candidate, seconds deadline) {
  const auto end = Clock::now() + deadline;
  const std::string old_leader = Leader();
  if (old_leader.empty()) Fail("Switchover: the cluster has no leader");
  if (candidate == old_leader) Fail("Switchover: " + candidate + " is already the leader");
  const PatroniMember* via = nullptr;
  for (const auto& m : members_) {
    if (!m.frozen && m.patroni_pid > 0) via = &m;
  }
  if (via == nullptr) Fail("Switchover: no running member to read the config of");
  std::vector<std::string> argv = {PatroniBin("patronictl"),
                                   "-c",
                                   via->config_file,
                                   "switchover",
                                   scope_,
                                   "--leader",
                                   old_leader,
                                   "--force"};
  if (!candidate.empty()) {
    argv.push_back("--candidate");
    argv.push_back(candidate);
  }
  CommandResult r = RunCommand(argv, /*as_postgres=*/true, deadline);
  if (r.exit_code != 0) {
    Fail("Switchover: $ " + FormatArgv(argv) + " (exit " + std::to_string(r.exit_code) + ")\n" +
         r.output);
  }
  std::string new_leader;
  bool switched = WaitFor(
      [&] {
        new_leader = Leader();
        if (new_leader.empty() || new_leader == old_leader) return false;
        std::string out;
        return TryQuery(new_leader, "SELECT pg_is_in_recovery()", &out, seconds(5)) && out == "f";
      },
      std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(end - Clock::now())),
      milliseconds(100));
  if (!switched) {
    Fail("Switchover: leader still '" + new_leader + "' (was " + old_leader +
         ")\npatronictl said:\n" + r.output);
  }
  if (!candidate.empty() && new_leader != candidate) {
    Fail("Switchover: new leader is " + new_leader + ", not " + candidate);
  }
  WaitHealthy(std::max(seconds(10), std::chrono::duration_cast<seconds>(end - Clock::now())));
  return new_leader;
}

std::vector<std::string> PatroniCluster::WritableMembers() const {
  std::vector<std::string> names;
  for (const auto& m : members_) {
    std::string out;
    if (TryQuery(m.name, "SELECT pg_is_in_recovery()", &out, seconds(5)) && out == "f") {
      names.push_back(m.name);
    }
  }
  return names;
}

void PatroniCluster::Reinit(const std::string& name, seconds deadline) {
  const PatroniMember& target = member(name);
  const PatroniMember* via = nullptr;
  for (const auto& m : members_) {
    if (!m.frozen && m.patroni_pid > 0) via = &m;
  }
  if (via == nullptr || target.frozen || target.patroni_pid <= 0) {
    Fail("Reinit(" + name + "): the member or every other member is frozen or stopped");
  }
  const std::vector<std::string> argv = {PatroniBin("patronictl"),
                                         "-c",
                                         via->config_file,
                                         "reinit",
                                         scope_,
                                         name,
                                         "--force",
                                         "--wait"};
  CommandResult r = RunCommand(argv, /*as_postgres=*/true, deadline);
  if (r.exit_code != 0) {
    Fail("Reinit: $ " + FormatArgv(argv) + " (exit " + std::to_string(r.exit_code) + ")\n" +
         r.output);
  }
}

std::vector<std::string> PatroniCluster::Heal(seconds deadline, seconds grace) {
  const auto end = Clock::now() + deadline;
  std::vector<std::string> reinitialized;
  std::string why;
  if (WaitFor([&] { return Healthy(&why); }, std::min(grace, deadline), milliseconds(200))) {
    WaitHealthy(std::max(seconds(10), std::chrono::duration_cast<seconds>(end - Clock::now())));
    return reinitialized;
  }
  const std::string leader = Leader();
  if (leader.empty()) Fail("Heal: no leader after " + std::to_string(grace.count()) + " s");
  std::string streaming;
  TryQuery(leader,
           "SELECT string_agg(application_name, ',') FROM pg_stat_replication "
           "WHERE state = 'streaming'",
           &streaming, seconds(10));
  const std::string list = "," + streaming + ",";
  for (const auto& m : members_) {
    if (m.name == leader || list.find("," + m.name + ",") != std::string::npos) continue;
    Reinit(m.name, std::max(seconds(30), std::chrono::duration_cast<seconds>(end - Clock::now())));
    reinitialized.push_back(m.name);
  }
  WaitHealthy(std::max(seconds(10), std::chrono::duration_cast<seconds>(end - Clock::now())));
  return reinitialized;
}

std::string PatroniCluster::DescribeLogs(int lines) const {
  std::string s;
  for (const auto& m : members_) {
    s += "--- " + m.name + " (patroni pid " + std::to_string(m.patroni_pid) +
         (m.frozen ? ", frozen" : "") + ", pg " + std::to_string(m.pg_port) + ", rest " +
         std::to_string(m.rest_port) + "): last lines of " + m.log_file + " ---\n" +
         Tail(m.log_file, lines);
  }
  s += "--- etcd: last lines of " + etcd_.log_file() + " ---\n" + etcd_.LogTail(10);
  return s;
}

void PatroniCluster::Fail(const std::string& what) const {
  throw std::runtime_error("[patroni cluster " + scope_ + "] " + what + "\n" +
                           DescribeLogs(kLogTailLines));
}

void PatroniCluster::StopAll() noexcept {
  try {
    // Thaw first: a stopped patroni cannot handle SIGTERM, and a stopped postgres cannot shut
    // down. Then SIGTERM every patroni at once, so that no replica tries to take over while the
    // leader stops.
    for (auto& m : members_) {
      if (m.patroni_pid > 0) ::kill(m.patroni_pid, SIGCONT);
      m.frozen = false;
      std::ifstream pidfile(m.data_dir + "/postmaster.pid");
      long pm = 0;
      if (pidfile >> pm && pm > 0) {
        for (pid_t p : ProcessTree(static_cast<pid_t>(pm))) ::kill(p, SIGCONT);
      }
    }
    for (auto& m : members_) {
      if (m.patroni_pid > 0) ::kill(m.patroni_pid, SIGTERM);
    }
    WaitFor(
        [&] {
          bool all = true;
          for (auto& m : members_) {
            if (m.patroni_pid > 0 && !Reaped(m.patroni_pid)) all = false;
          }
          return all;
        },
        kPatroniStopDeadline, milliseconds(50));
    for (auto& m : members_) {
      if (m.patroni_pid > 0 && !Reaped(m.patroni_pid)) {
        TerminateChild(m.patroni_pid, SIGKILL, kSignalDeadline);
      }
      m.patroni_pid = -1;
    }
    // Patroni starts postgres in its own session (not our child): make sure it is gone.
    for (auto& m : members_) {
      std::ifstream pidfile(m.data_dir + "/postmaster.pid");
      long pm = 0;
      if (!(pidfile >> pm) || pm <= 0 || !IsAlive(static_cast<pid_t>(pm))) continue;
      const std::string cmdline = ReadFile("/proc/" + std::to_string(pm) + "/cmdline");
      if (cmdline.find("postgres") == std::string::npos) continue;  // pid reused
      RunCommand({PgBin("pg_ctl"), "-D", m.data_dir, "-m", "immediate", "-w", "-t", "30", "stop"},
                 /*as_postgres=*/true, seconds(45));
      if (IsAlive(static_cast<pid_t>(pm))) {
        std::vector<pid_t> tree = ProcessTree(static_cast<pid_t>(pm));
        for (pid_t p : tree) ::kill(p, SIGKILL);
        WaitFor(
            [&] {
              for (pid_t p : tree) {
                if (IsAlive(p)) return false;
              }
              return true;
            },
            kSignalDeadline);
      }
    }
    // Forget the cluster in etcd, so that the scope can be bootstrapped again.
    if (etcd_.running()) {
      try {
        etcd_.PostV3("kv/deleterange",
                     json{{"key", Base64Encode(KeyPrefix())},
                          {"range_end", Base64Encode(PrefixRangeEnd(KeyPrefix()))}}
                         .dump());
      } catch (const std::exception&) {
      }
    }
    std::error_code ec;
    for (auto it = created_dirs_.rbegin(); it != created_dirs_.rend(); ++it) {
      fs::remove_all(*it, ec);
    }
    if (!password_file_.empty()) fs::remove(password_file_, ec);
    created_dirs_.clear();
  } catch (...) {
  }
}

}  // namespace sbd::testing
