// The real splitbrain-detector binary run in the background by a test, and small helpers to
// read its HTTP endpoints.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
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
  /// Sends SIGHUP and waits up to `deadline` for the detector to log that a reload finished
  /// ("config reloaded", or "reload failed" when the new config was refused). True when it
  /// reloaded. Write the config files before calling it, not during: a reload reads them when
  /// it runs, and a SIGHUP's wait ends only once one has.
  bool Reload(std::chrono::seconds deadline);
  /// Sends SIGKILL and reaps it; idempotent.
  void Kill();
  std::string Log() const;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

/// Starts `binary --config.file=config --web.listen-address=127.0.0.1:port` (output appended to
/// `log_path`) and waits up to 30 s for /-/ready; throws std::runtime_error with its log if
/// it is not ready by then.
std::unique_ptr<DetectorProcess> StartReadyDetector(const std::string& binary,
                                                    const std::string& config, int port,
                                                    const std::string& log_path);

/// The entry of cluster `name` in the detector's /status, or null when /status cannot be read
/// or parsed or has no such cluster.
nlohmann::json ClusterStatus(int port, const std::string& name);

/// GET http://127.0.0.1:port/path; the body on 200, "" otherwise.
std::string HttpGet(int port, const std::string& path);
/// True when `body` has exactly this line.
bool HasLine(const std::string& body, const std::string& line);
/// The value of one series (name with labels, as exposed) in an exposition, or -1 if absent.
double MetricValue(const std::string& body, const std::string& series);
/// Writes `text` to dir/name and returns the path.
std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text);
/// The same, written beside it and renamed over it, as a config management tool replaces a
/// file: a reader sees the old text or the new, never half of it. Throws if the rename fails.
std::string ReplaceFile(const std::string& dir, const std::string& name, const std::string& text);

}  // namespace sbd::testing
