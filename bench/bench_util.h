// Small helpers for the benchmark harness: the OS's own accounting of a process (/proc), the
// machine, percentiles, a timed HTTP GET and a parser for the Prometheus text format.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sbd::bench {

/// CPU time (user + system, all threads) and memory of one process, from /proc/PID/stat and
/// /proc/PID/status. ok is false when the process is gone.
struct ProcUsage {
  bool ok = false;
  double cpu_seconds = 0;
  double rss_mb = 0;  // VmRSS
  double hwm_mb = 0;  // VmHWM: peak resident set size
  int threads = 0;
};
ProcUsage ReadProcUsage(pid_t pid);

/// "0.52 0.61 0.70 2/180 12345" from /proc/loadavg, without the newline.
std::string LoadAvg();
/// The 1-minute load average.
double LoadAvg1();
/// CPU model name from /proc/cpuinfo.
std::string CpuModel();
/// Total memory in MB.
double MemTotalMb();
/// UTC now as "2026-11-29T14:30:00Z".
std::string UtcNow();

/// The p-quantile (0..1, nearest rank) of `values`; -1 when empty.
double Percentile(std::vector<double> values, double p);
double Median(const std::vector<double>& values);
double Max(const std::vector<double>& values);

/// GET http://127.0.0.1:port/path with a timeout; status 0 on a transport error.
struct TimedGet {
  int status = 0;
  std::string body;
  double seconds = 0;
};
TimedGet HttpGetTimed(int port, const std::string& path,
                      std::chrono::seconds timeout = std::chrono::seconds(30));

/// One sample of a text exposition: metric name, labels and value.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
/// Parses the samples of the families whose names start with `prefix` (comments skipped).
std::vector<Sample> ParseExposition(const std::string& body, const std::string& prefix);

/// Seconds since the epoch of an RFC 3339 UTC time ("2026-11-29T14:50:52.123Z"); -1 if bad.
double ParseRfc3339(const std::string& text);
/// Seconds since the epoch of a wall-clock instant.
double WallSeconds(std::chrono::system_clock::time_point t);
/// One progress line on stderr: "[bench <UTC time>] line".
void Log(const std::string& line);

/// Formats `v` with `digits` decimals; "-" for a negative value (not measured).
std::string Fixed(double v, int digits = 2);

}  // namespace sbd::bench
