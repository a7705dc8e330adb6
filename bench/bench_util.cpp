#include "bench/bench_util.h"

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace sbd::bench {

namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double StatusKb(const std::string& status, const std::string& key) {
  const auto at = status.find("\n" + key + ":");
  if (at == std::string::npos) return 0;
  return std::strtod(status.c_str() + at + key.size() + 2, nullptr);
}

}  // namespace

ProcUsage ReadProcUsage(pid_t pid) {
  ProcUsage usage;
  const std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return usage;
  std::istringstream fields(stat.substr(paren + 2));
  std::vector<std::string> f;
  for (std::string token; fields >> token;) f.push_back(token);
  // f[0] is field 3 (state): utime is field 14, stime 15, num_threads 20.
  if (f.size() < 18) return usage;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  usage.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / tick;
  usage.threads = std::stoi(f[17]);
  const std::string status = "\n" + Slurp("/proc/" + std::to_string(pid) + "/status");
  usage.rss_mb = StatusKb(status, "VmRSS") / 1024.0;
  usage.hwm_mb = StatusKb(status, "VmHWM") / 1024.0;
  usage.ok = true;
  return usage;
}

std::string LoadAvg() {
  std::string s = Slurp("/proc/loadavg");
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

double LoadAvg1() { return std::strtod(LoadAvg().c_str(), nullptr); }

std::string CpuModel() {
  std::istringstream in(Slurp("/proc/cpuinfo"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

double MemTotalMb() { return StatusKb("\n" + Slurp("/proc/meminfo"), "MemTotal") / 1024.0; }

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p * static_cast<double>(values.size()));
  const size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

double Median(const std::vector<double>& values) { return Percentile(values, 0.5); }

double Max(const std::vector<double>& values) { return Percentile(values, 1.0); }

TimedGet HttpGetTimed(int port, const std::string& path, std::chrono::seconds timeout) {
  TimedGet out;
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  const auto start = std::chrono::steady_clock::now();
  auto res = client.Get(path.c_str());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (res) {
    out.status = res->status;
    out.body = std::move(res->body);
  }
  return out;
}

std::vector<Sample> ParseExposition(const std::string& body, const std::string& prefix) {
  std::vector<Sample> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    if (body.compare(pos, prefix.size(), prefix) == 0) {
      const std::string line = body.substr(pos, end - pos);
      Sample sample;
      const auto brace = line.find('{');
      const auto space = line.rfind(' ');
      if (space != std::string::npos) {
        sample.name = line.substr(0, std::min(brace, space));
        if (brace != std::string::npos && brace < space) {
          // name{a="x",b="y"} value: label values here never hold quotes or commas.
          const auto close = line.rfind('}', space);
          std::string labels = line.substr(brace + 1, close - brace - 1);
          size_t at = 0;
          while (at < labels.size()) {
            const auto eq = labels.find('=', at);
            if (eq == std::string::npos) break;
            const auto q2 = labels.find('"', eq + 2);
            if (q2 == std::string::npos) break;
            sample.labels[labels.substr(at, eq - at)] = labels.substr(eq + 2, q2 - eq - 2);
            at = q2 + 2;
          }
        }
        sample.value = std::strtod(line.c_str() + space + 1, nullptr);
        out.push_back(std::move(sample));
      }
    }
    pos = end + 1;
  }
  return out;
}

double ParseRfc3339(const std::string& text) {
  std::tm tm{};
  if (text.size() < 20 || strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return -1;
  double seconds = static_cast<double>(timegm(&tm));
  if (text[19] == '.') seconds += std::strtod(text.c_str() + 19, nullptr);
  return seconds;
}

double WallSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

void Log(const std::string& line) { std::cerr << "[bench " << UtcNow() << "] " << line << "\n"; }

std::string Fixed(double v, int digits) {
  if (v < 0) return "-";
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

}  // namespace sbd::bench
