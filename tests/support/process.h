// Process helpers for the test harness: run a command (optionally as the `postgres` OS user),
// start, reap and stop long-running background processes, find a free loopback port, list and
// kill a process tree, and wait on a condition with a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace sbd::testing {

struct CommandResult {
  int exit_code;       // exit status; 128+N if killed by signal N; 127 if it could not be
                       // executed; -1 on timeout
  std::string output;  // stdout and stderr, interleaved in arrival order
};

/// Runs argv[0] (looked up in PATH unless it contains a '/') with fork/exec, no shell. stdin is
/// /dev/null, stdout and stderr are captured together. The child gets its own process group, no
/// blocked signals, default dispositions and no inherited file descriptors besides 0-2. If
/// `as_postgres` is true and we are root, the command runs through `runuser -u postgres --` from
/// the working directory "/" (postgres cannot read root's home). The whole process group is
/// SIGKILLed when `timeout` expires, in which case exit_code is -1.
CommandResult RunCommand(const std::vector<std::string>& argv, bool as_postgres = false,
                         std::chrono::seconds timeout = std::chrono::seconds(120));

/// Same as RunCommand, but keeps stdout and stderr apart.
struct SplitCommandResult {
  int exit_code;
  std::string out;
  std::string err;
};
SplitCommandResult RunCommandSplit(const std::vector<std::string>& argv, bool as_postgres = false,
                                   std::chrono::seconds timeout = std::chrono::seconds(120));

/// Human readable "argv joined by spaces" for error messages.
std::string FormatArgv(const std::vector<std::string>& argv);
/// "$ <argv>\n(exit N)\n<output>" ("(timed out)" for exit code -1), for error messages.
std::string DescribeCommandRun(const std::vector<std::string>& argv, int exit_code,
                               const std::string& output);

/// Looks `name` up in `preferred_dirs` (':'-separated), then in $PATH (a default one when unset),
/// then in /usr/sbin and /sbin, for an executable regular file. `name` itself when it contains a
/// '/'; "" when not found.
std::string FindExecutable(const std::string& name, const std::string& preferred_dirs = "");

/// True when the process runs as root, i.e. PostgreSQL commands must go through runuser.
bool RunningAsRoot();

/// Binds 127.0.0.1:0, reads the port the kernel chose and closes the socket. Throws on failure.
int FreeLoopbackPort();

/// `root` followed by all its descendants (breadth first), found by scanning the ppid field of
/// /proc/*/stat. Empty if `root` does not exist.
std::vector<pid_t> ProcessTree(pid_t root);

/// State letter of a process from /proc/PID/stat ('R', 'S', 'T', 'Z', ...), or '\0' if gone.
char ProcessState(pid_t pid);

/// How SpawnBackgroundProcess starts a long-running process.
struct BackgroundOptions {
  /// Run as the `postgres` OS user when we are root. The child switches user itself (no
  /// runuser), so the returned pid is the program's own.
  bool as_postgres = false;
  /// Working directory of the child ("/" when it cannot be entered); empty: ours.
  std::string workdir;
  /// A minimal environment (PATH, HOME, USER, LOGNAME, LANG=C.UTF-8, PYTHONUNBUFFERED=1,
  /// PYTHONFAULTHANDLER=1, and TZ when set) instead of ours.
  bool minimal_environment = false;
  /// The child gets SIGTERM from the kernel when the thread that started it exits
  /// (PR_SET_PDEATHSIG), e.g. when the test binary crashes: start it from the main thread.
  bool die_with_parent = false;
};

/// fork/exec of a long-running process: argv[0] is looked up with FindExecutable unless it
/// contains a '/'. The child runs in its own process group with no blocked signals and default
/// dispositions, stdin from /dev/null, stdout and stderr appended to `log_file` (created 0640,
/// and given to postgres with as_postgres), and no other inherited descriptors. Returns its pid
/// at once; reap it with ReapIfExited or StopChildProcess. Throws std::runtime_error when the
/// program is not executable or the log cannot be opened.
pid_t SpawnBackgroundProcess(const std::vector<std::string>& argv, const std::string& log_file,
                             const BackgroundOptions& options = {});

/// Non-blocking reap of a child. True when `pid` has exited (it is reaped then, and `how` says
/// "exited with status N" or "killed by signal N") or is not our child (any more), and for
/// pid <= 0.
bool ReapIfExited(pid_t pid, std::string* how = nullptr);

/// Stops a child: SIGCONT and `sig` to it (to its whole process group with `whole_group`), waits
/// up to `deadline` for it to exit, then SIGKILLs its process group and reaps it. Never throws.
void StopChildProcess(pid_t pid, int sig, std::chrono::milliseconds deadline,
                      bool whole_group = false);

enum class StartupOutcome { kReady, kExited, kTimedOut };
/// Calls `ready` every `poll` until it returns true (kReady), the child `pid` exits first
/// (kExited: it is reaped and `how` says how) or `deadline` has elapsed (kTimedOut: the child is
/// left running).
StartupOutcome WaitUntilReady(pid_t pid, const std::function<bool()>& ready,
                              std::chrono::milliseconds deadline, std::chrono::milliseconds poll,
                              std::string* how = nullptr);

/// True while `pid` exists and is not a zombie.
bool ProcessAlive(pid_t pid);

/// SIGKILLs `root` and all its descendants (ProcessTree) and waits up to `deadline` until none
/// of them is alive. True when they are all gone (also when `root` does not exist).
bool KillProcessTree(pid_t root, std::chrono::milliseconds deadline);

/// Calls `cond` until it returns true or `deadline` has elapsed, sleeping `poll` in between.
/// `cond` is always evaluated at least once and once more at the deadline. Returns its last value.
bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds deadline,
             std::chrono::milliseconds poll = std::chrono::milliseconds(50));

}  // namespace sbd::testing
