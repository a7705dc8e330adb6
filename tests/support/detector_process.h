// The real splitbrain-detector binary run in the background by a test, and small helpers to
// read its HTTP endpoints.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace sbd::testing {

/// Runs `binary args...` with stdout and stderr appended to `log_path`. The destructor kills
/// it. Not thread-safe; non-copyable.
class DetectorProcess {
 public:
  DetectorProcess(const std::string& binary, const std::vector<std::string>& args,
                  std::string log_path);
  ~DetectorProcess();
  DetectorProcess(const DetectorProcess&) = delete;
  DetectorProcess& operator=(const DetectorProcess&) = delete;
  void Signal(int sig);
  /// Sends SIGKILL and reaps it; idempotent.
  void Kill();
  std::string Log() const;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

/// GET http://127.0.0.1:port/path; the body on 200, "" otherwise.
std::string HttpGet(int port, const std::string& path);
/// True when `body` has exactly this line.
bool HasLine(const std::string& body, const std::string& line);
/// The value of one series (name with labels, as exposed) in an exposition, or -1 if absent.
double MetricValue(const std::string& body, const std::string& series);
/// Writes `text` to dir/name and returns the path.
std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text);

}  // namespace sbd::testing
