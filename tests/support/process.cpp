#include "tests/support/process.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/files.h"

namespace sbd::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool IsExecutable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Moves a descriptor to >= 3 so that it cannot collide with the child's stdio slots when the
// parent runs with closed standard descriptors. Keeps O_CLOEXEC.
int MoveAboveStdio(int fd) {
  if (fd >= 3) return fd;
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (moved < 0)
    throw std::runtime_error(std::string("fcntl(F_DUPFD_CLOEXEC): ") + strerror(errno));
  ::close(fd);
  return moved;
}

void MakePipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe2: ") + strerror(errno));
  }
  fds[0] = MoveAboveStdio(fds[0]);
  fds[1] = MoveAboveStdio(fds[1]);
}

void CloseFromInChild(int lowfd) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(lowfd), ~0U, 0) == 0) return;
#endif
  long max_fd = ::sysconf(_SC_OPEN_MAX);
  if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
  for (int fd = lowfd; fd < max_fd; ++fd) ::close(fd);
}

// Runs in a forked child, so only async-signal-safe calls (the parent may be multi-threaded): its
// own process group, no blocked signals, default dispositions, `in_fd` (when >= 0), `out_fd` and
// `err_fd` as stdin, stdout and stderr, and no other descriptor.
void SetUpChild(int in_fd, int out_fd, int err_fd) {
  ::setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) ::signal(sig, SIG_DFL);
  if (in_fd >= 0) ::dup2(in_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  CloseFromInChild(3);
}

int OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
#else
  (void)pid;
  return -1;
#endif
}

// Reads what is available from `fd` into `sink`. Returns false on EOF or hard error (the
// descriptor is then closed and set to -1).
bool ReadSome(int& fd, std::string& sink) {
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      sink.append(buf, static_cast<size_t>(n));
      continue;  // non-blocking: keep going until EAGAIN
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    ::close(fd);
    fd = -1;
    return false;
  }
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

struct RawResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

RawResult Run(const std::vector<std::string>& argv_in, bool as_postgres,
              std::chrono::seconds timeout, bool merge) {
  RawResult result;
  if (argv_in.empty()) throw std::invalid_argument("RunCommand: empty argv");

  std::vector<std::string> argv;
  const bool via_runuser = as_postgres && RunningAsRoot();
  std::string program = FindExecutable(argv_in[0]);
  if (program.empty()) {
    result.exit_code = 127;
    result.out = "command not found: " + argv_in[0] + "\n";
    return result;
  }
  if (via_runuser) {
    std::string runuser = FindExecutable("runuser");
    if (runuser.empty()) throw std::runtime_error("RunCommand: runuser not found");
    argv = {runuser, "-u", "postgres", "--", program};
  } else {
    argv = {program};
  }
  argv.insert(argv.end(), argv_in.begin() + 1, argv_in.end());

  // Everything the child needs is prepared before fork(): the parent may be multi-threaded, so
  // the child only calls async-signal-safe functions.
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const std::string exec_error = "RunCommand: failed to exec " + argv[0] + "\n";
  const char* workdir = as_postgres ? "/" : nullptr;

  int out_pipe[2];
  int err_pipe[2] = {-1, -1};
  MakePipe(out_pipe);
  if (!merge) {
    try {
      MakePipe(err_pipe);
    } catch (...) {
      ::close(out_pipe[0]);
      ::close(out_pipe[1]);
      throw;
    }
  }

  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
      if (fd >= 0) ::close(fd);
    }
    throw std::runtime_error(std::string("fork: ") + strerror(e));
  }
  if (pid == 0) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    SetUpChild(null_fd, out_pipe[1], merge ? out_pipe[1] : err_pipe[1]);
    if (workdir != nullptr && ::chdir(workdir) != 0) _exit(127);
    ::execv(cargv[0], cargv.data());
    ssize_t ignored = ::write(2, exec_error.data(), exec_error.size());
    (void)ignored;
    _exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so a kill(-pid) can never miss the group
  ::close(out_pipe[1]);
  if (!merge) ::close(err_pipe[1]);
  int out_fd = out_pipe[0];
  int err_fd = merge ? -1 : err_pipe[0];
  ::fcntl(out_fd, F_SETFL, O_NONBLOCK);
  if (err_fd >= 0) ::fcntl(err_fd, F_SETFL, O_NONBLOCK);
  int pid_fd = OpenPidfd(pid);

  const auto deadline = Clock::now() + timeout;
  bool reaped = false;
  bool timed_out = false;
  int status = 0;
  auto try_reap = [&] {
    for (;;) {
      pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r < 0 && errno == EINTR) continue;
      if (r == pid) reaped = true;
      return;
    }
  };

  while (!reaped) {
    auto now = Clock::now();
    if (now >= deadline) {
      timed_out = true;
      break;
    }
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    pollfd fds[3];
    int nfds = 0;
    if (out_fd >= 0) fds[nfds++] = {out_fd, POLLIN, 0};
    if (err_fd >= 0) fds[nfds++] = {err_fd, POLLIN, 0};
    if (pid_fd >= 0) fds[nfds++] = {pid_fd, POLLIN, 0};
    // Without a pidfd we cannot be woken by the exit itself (a grandchild may keep the pipe
    // open), so we check waitpid at least every 20 ms.
    int wait_ms = static_cast<int>(remaining + 1);
    if (pid_fd < 0) wait_ms = std::min(wait_ms, 20);
    int pr = ::poll(fds, static_cast<nfds_t>(nfds), wait_ms);
    if (pr < 0 && errno != EINTR) break;
    if (out_fd >= 0) ReadSome(out_fd, result.out);
    if (err_fd >= 0) ReadSome(err_fd, merge ? result.out : result.err);
    try_reap();
  }

  if (timed_out || !reaped) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  // Drain what the child wrote just before exiting; do not wait for descendants that may still
  // hold the pipe (e.g. a daemon started by the command).
  if (out_fd >= 0) ReadSome(out_fd, result.out);
  if (err_fd >= 0) ReadSome(err_fd, merge ? result.out : result.err);
  for (int fd : {out_fd, err_fd, pid_fd}) {
    if (fd >= 0) ::close(fd);
  }
  result.exit_code = timed_out ? -1 : DecodeStatus(status);
  return result;
}

}  // namespace

bool RunningAsRoot() { return ::geteuid() == 0; }

std::string FormatArgv(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`;&|<>()*?") == std::string::npos;
    if (plain) {
      s += a;
    } else {
      s += '\'';
      for (char c : a) {
        if (c == '\'') {
          s += "'\\''";
        } else {
          s += c;
        }
      }
      s += '\'';
    }
  }
  return s;
}

std::string DescribeCommandRun(const std::vector<std::string>& argv, int exit_code,
                               const std::string& output) {
  std::string s = "$ " + FormatArgv(argv) + "\n";
  s += exit_code == -1 ? std::string("(timed out)") : "(exit " + std::to_string(exit_code) + ")";
  s += "\n" + output;
  return s;
}

std::string FindExecutable(const std::string& name, const std::string& preferred_dirs) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return name;
  const char* env_path = std::getenv("PATH");
  std::string path = preferred_dirs;
  path += ':';
  path += env_path != nullptr && *env_path != '\0'
              ? env_path
              : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  // runuser lives in /usr/sbin, which a non-login PATH may lack.
  path += ":/usr/sbin:/sbin";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (IsExecutable(candidate)) return candidate;
  }
  return "";
}

CommandResult RunCommand(const std::vector<std::string>& argv, bool as_postgres,
                         std::chrono::seconds timeout) {
  RawResult r = Run(argv, as_postgres, timeout, /*merge=*/true);
  return CommandResult{r.exit_code, std::move(r.out)};
}

SplitCommandResult RunCommandSplit(const std::vector<std::string>& argv, bool as_postgres,
                                   std::chrono::seconds timeout) {
  RawResult r = Run(argv, as_postgres, timeout, /*merge=*/false);
  return SplitCommandResult{r.exit_code, std::move(r.out), std::move(r.err)};
}

int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error(std::string("bind(127.0.0.1:0): ") + strerror(e));
  }
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error(std::string("getsockname: ") + strerror(e));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

namespace {

// Parses /proc/PID/stat. The comm field may contain spaces and parentheses, so the fields after
// it are located from the last ')'.
bool ReadStat(pid_t pid, char* state, pid_t* ppid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return false;
  std::string line;
  std::getline(in, line);
  auto close_paren = line.rfind(')');
  if (close_paren == std::string::npos) return false;
  std::istringstream rest(line.substr(close_paren + 1));
  char st = 0;
  long parent = 0;
  if (!(rest >> st >> parent)) return false;
  if (state != nullptr) *state = st;
  if (ppid != nullptr) *ppid = static_cast<pid_t>(parent);
  return true;
}

}  // namespace

char ProcessState(pid_t pid) {
  char st = 0;
  if (!ReadStat(pid, &st, nullptr)) return '\0';
  return st;
}

std::vector<pid_t> ProcessTree(pid_t root) {
  std::vector<pid_t> tree;
  if (root <= 0 || ProcessState(root) == '\0') return tree;
  std::multimap<pid_t, pid_t> children;  // ppid -> pid
  if (DIR* dir = ::opendir("/proc")) {
    while (dirent* ent = ::readdir(dir)) {
      char* end = nullptr;
      long pid = std::strtol(ent->d_name, &end, 10);
      if (end == ent->d_name || *end != '\0' || pid <= 0) continue;
      pid_t ppid = 0;
      if (ReadStat(static_cast<pid_t>(pid), nullptr, &ppid)) {
        children.emplace(ppid, static_cast<pid_t>(pid));
      }
    }
    ::closedir(dir);
  }
  std::deque<pid_t> queue{root};
  while (!queue.empty()) {
    pid_t p = queue.front();
    queue.pop_front();
    tree.push_back(p);
    auto range = children.equal_range(p);
    for (auto it = range.first; it != range.second; ++it) queue.push_back(it->second);
  }
  return tree;
}

bool ProcessAlive(pid_t pid) {
  char st = ProcessState(pid);
  return st != '\0' && st != 'Z';
}

bool KillProcessTree(pid_t root, std::chrono::milliseconds deadline) {
  const std::vector<pid_t> tree = ProcessTree(root);
  for (pid_t pid : tree) ::kill(pid, SIGKILL);
  return WaitFor(
      [&] {
        for (pid_t pid : tree) {
          if (ProcessAlive(pid)) return false;
        }
        return true;
      },
      deadline);
}

pid_t SpawnBackgroundProcess(const std::vector<std::string>& argv_in, const std::string& log_file,
                             const BackgroundOptions& options) {
  if (argv_in.empty()) throw std::invalid_argument("SpawnBackgroundProcess: empty argv");
  const bool switch_user = options.as_postgres && RunningAsRoot();
  const OsUser* postgres = switch_user ? &PostgresUser() : nullptr;

  std::vector<std::string> argv = argv_in;
  argv[0] = FindExecutable(argv[0]);
  if (argv[0].empty() || !IsExecutable(argv[0])) {
    throw std::runtime_error("SpawnBackgroundProcess: program not found or not executable: " +
                             argv_in[0]);
  }
  std::vector<std::string> env;
  if (options.minimal_environment) {
    std::string home = "/";
    std::string user = "postgres";
    if (switch_user) {
      home = postgres->home;
    } else {
      if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') home = h;
      passwd* pw = ::getpwuid(::geteuid());
      user = pw != nullptr ? pw->pw_name : "nobody";
    }
    env = {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
           "HOME=" + home,
           "USER=" + user,
           "LOGNAME=" + user,
           "LANG=C.UTF-8",
           "PYTHONUNBUFFERED=1",
           "PYTHONFAULTHANDLER=1"};
    if (const char* tz = std::getenv("TZ"); tz != nullptr) env.push_back(std::string("TZ=") + tz);
  }

  // Everything the child needs is prepared before fork(): the parent may be multi-threaded, so
  // the child only calls async-signal-safe functions.
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const std::string exec_error = "SpawnBackgroundProcess: failed to exec " + argv[0] + "\n";
  const std::string setuid_error =
      "SpawnBackgroundProcess: failed to switch to the postgres user\n";
  const std::vector<gid_t> groups = switch_user ? postgres->groups : std::vector<gid_t>{};
  const uid_t uid = switch_user ? postgres->uid : 0;
  const gid_t gid = switch_user ? postgres->gid : 0;
  const char* workdir = options.workdir.empty() ? nullptr : options.workdir.c_str();

  int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (log_fd < 0) throw std::runtime_error("open " + log_file + ": " + strerror(errno));
  int null_fd = -1;
  try {
    log_fd = MoveAboveStdio(log_fd);
    if (switch_user && ::fchown(log_fd, uid, gid) != 0) {
      throw std::runtime_error("chown " + log_file + ": " + strerror(errno));
    }
    null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0) throw std::runtime_error(std::string("open /dev/null: ") + strerror(errno));
    null_fd = MoveAboveStdio(null_fd);
  } catch (...) {
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    throw;
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
    SetUpChild(null_fd, log_fd, log_fd);
    if (switch_user) {
      if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 ||
          ::setuid(uid) != 0) {
        ssize_t ignored = ::write(2, setuid_error.data(), setuid_error.size());
        (void)ignored;
        _exit(126);
      }
    }
    if (options.die_with_parent) {
      // After the credential change, which clears it.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) _exit(1);
    }
    if (workdir != nullptr && ::chdir(workdir) != 0 && ::chdir("/") != 0) _exit(127);
    if (options.minimal_environment) {
      ::execve(cargv[0], cargv.data(), cenv.data());
    } else {
      ::execv(cargv[0], cargv.data());
    }
    ssize_t ignored = ::write(2, exec_error.data(), exec_error.size());
    (void)ignored;
    _exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so a kill(-pid) can never miss the group
  ::close(log_fd);
  ::close(null_fd);
  return pid;
}

bool ReapIfExited(pid_t pid, std::string* how) {
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

void StopChildProcess(pid_t pid, int sig, std::chrono::milliseconds deadline, bool whole_group) {
  if (pid <= 0) return;
  const pid_t target = whole_group ? -pid : pid;
  ::kill(target, SIGCONT);
  ::kill(target, sig);
  if (WaitFor([&] { return ReapIfExited(pid); }, deadline, std::chrono::milliseconds(10))) {
    return;
  }
  ::kill(-pid, SIGCONT);
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

StartupOutcome WaitUntilReady(pid_t pid, const std::function<bool()>& ready,
                              std::chrono::milliseconds deadline, std::chrono::milliseconds poll,
                              std::string* how) {
  bool exited = false;
  bool done = WaitFor(
      [&] {
        if (ReapIfExited(pid, how)) {
          exited = true;
          return true;
        }
        return ready();
      },
      deadline, poll);
  if (exited) return StartupOutcome::kExited;
  return done ? StartupOutcome::kReady : StartupOutcome::kTimedOut;
}

bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds deadline,
             std::chrono::milliseconds poll) {
  const auto end = Clock::now() + deadline;
  for (;;) {
    if (cond()) return true;
    auto now = Clock::now();
    if (now >= end) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - now);
    std::this_thread::sleep_for(std::min(poll, left));
    if (Clock::now() >= end) return cond();
  }
}

}  // namespace sbd::testing
