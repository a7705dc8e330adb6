// Small process helpers for the test harness: run a command (optionally as the `postgres` OS
// user), find a free loopback port, list a process tree, and wait on a condition with a deadline.
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
/// /dev/null, stdout and stderr are captured together. The child gets its own process group and
/// no inherited file descriptors besides 0-2. If `as_postgres` is true and we are root, the
/// command runs through `runuser -u postgres --` from the working directory "/" (postgres cannot
/// read root's home). The whole process group is SIGKILLed when `timeout` expires, in which case
/// exit_code is -1.
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

/// True when the process runs as root, i.e. PostgreSQL commands must go through runuser.
bool RunningAsRoot();

/// Binds 127.0.0.1:0, reads the port the kernel chose and closes the socket. Throws on failure.
int FreeLoopbackPort();

/// `root` followed by all its descendants (breadth first), found by scanning the ppid field of
/// /proc/*/stat. Empty if `root` does not exist.
std::vector<pid_t> ProcessTree(pid_t root);

/// State letter of a process from /proc/PID/stat ('R', 'S', 'T', 'Z', ...), or '\0' if gone.
char ProcessState(pid_t pid);

/// Calls `cond` until it returns true or `deadline` has elapsed, sleeping `poll` in between.
/// `cond` is always evaluated at least once and once more at the deadline. Returns its last value.
bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds deadline,
             std::chrono::milliseconds poll = std::chrono::milliseconds(50));

}  // namespace sbd::testing
