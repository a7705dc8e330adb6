#include "detector/output/incident_file.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "detector/common/json_text.h"
#include "detector/common/logfmt.h"
#include "detector/config/declaration.h"
#include "detector/output/status.h"

namespace sbd {
namespace {

constexpr int kFileVersion = 1;
// A clock that stepped back may leave events slightly ahead; a day ahead is not a clock.
constexpr auto kFutureSlack = std::chrono::hours(24);

const std::set<std::string>& Kinds() {
  static const std::set<std::string> kinds = {
      "verdict_changed", "member_state_changed", "split_brain_opened", "split_brain_closed",
      "cluster_added",   "cluster_removed",      "remediation"};
  return kinds;
}

std::optional<IncidentEvent> EventFromLine(const std::string& line, WallClock::time_point now) {
  const nlohmann::json json = nlohmann::json::parse(line, nullptr, false);
  if (!json.is_object()) return std::nullopt;
  const auto text = [&](const char* key) { return IncidentField(json, key); };
  auto version = json.find("v");
  auto fields = json.find("fields");
  if (version == json.end() || *version != kFileVersion || fields == json.end() ||
      !fields->is_object() || !Kinds().count(text("kind")) || text("cluster").empty()) {
    return std::nullopt;
  }
  const std::optional<WallTime> time = ParseRfc3339(text("time"));
  if (!time || *time > now + kFutureSlack) return std::nullopt;
  return IncidentEvent{*time, text("cluster"), text("kind"), *fields};
}

}  // namespace

// A string field of an object read from the file, "" when absent or of another type: the file
// is untrusted, and nlohmann's value() would throw on a wrong type.
std::string IncidentField(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string IncidentFileLine(const IncidentEvent& event) {
  nlohmann::json json = IncidentEventJson(event);
  json["v"] = kFileVersion;
  return JsonText(json) + "\n";
}

nlohmann::json IncidentEventJson(const IncidentEvent& event) {
  return {{"time", FormatTime(event.time)},
          {"cluster", event.cluster},
          {"kind", event.kind},
          {"fields", event.fields}};
}

IncidentFile ReadIncidentFile(const std::string& path, Millis retention, WallClock::time_point now,
                              std::uintmax_t max_bytes) {
  IncidentFile result;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return result;
  std::ifstream in(path, std::ios::binary);
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!in || ec) {
    result.error = "cannot read " + path;
    return result;
  }
  std::string line;
  if (size > max_bytes) {
    // Only the newest part: the line cut in two at the start is skipped.
    in.seekg(static_cast<std::streamoff>(size - max_bytes));
    std::getline(in, line);
    ++result.skipped_lines;
  }
  std::uintmax_t read = 0;
  while (read < max_bytes && std::getline(in, line)) {
    read += line.size() + 1;
    ++result.lines;
    std::optional<IncidentEvent> event = EventFromLine(line, now);
    if (!event) {
      ++result.skipped_lines;
    } else if (event->time < now - retention) {
      ++result.expired;
    } else {
      result.events.push_back(std::move(*event));
    }
  }
  std::stable_sort(result.events.begin(), result.events.end(),
                   [](const auto& a, const auto& b) { return a.time < b.time; });
  return result;
}

IncidentFileWriter::IncidentFileWriter(std::string path, size_t max_queued, WriteHook before_write)
    : path_(std::move(path)), max_queued_(max_queued), before_write_(std::move(before_write)) {}

void IncidentFileWriter::Start(const std::shared_ptr<IncidentFileWriter>& self) {
  self->thread_ = std::thread([self] { self->Run(); });
}

bool IncidentFileWriter::Append(std::string lines) { return Queue({false, std::move(lines)}); }

size_t IncidentFileWriter::Rewrite(std::string content) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t replaced = 0;
  for (const Job& job : queue_) replaced += job.rewrite ? 0 : 1;
  queue_.clear();
  queue_.push_back({true, std::move(content)});
  cv_.notify_all();
  return replaced;
}

bool IncidentFileWriter::Flush(Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return queue_.empty() && !busy_; });
}

void IncidentFileWriter::Stop(Millis timeout) {
  const bool drained = Flush(timeout);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (drained) {
    thread_.join();
  } else {
    spdlog::error("msg=\"incident log writes still pending at exit; left unfinished\" file={}",
                  LogfmtEscape(path_));
    thread_.detach();
  }
}

bool IncidentFileWriter::Queue(Job job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.size() >= max_queued_) return false;
  queue_.push_back(std::move(job));
  cv_.notify_all();
  return true;
}

void IncidentFileWriter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    if (before_write_) before_write_();
    job.rewrite ? WriteWhole(job.text) : AppendLines(job.text);
    lock.lock();
    busy_ = false;
    idle_cv_.notify_all();
  }
}

// One flush per batch: a crash loses at most the round being written.
void IncidentFileWriter::AppendLines(const std::string& lines) {
  if (!file_.is_open()) file_.open(path_, std::ios::app | std::ios::binary);
  file_ << lines;
  file_.flush();
  const bool failing = !file_.good();
  if (failing && !failing_) {
    spdlog::error("msg=\"cannot append to the incident log; keeping events in memory\" file={}",
                  LogfmtEscape(path_));
  }
  if (failing) {
    file_.close();
    file_.clear();
  }
  failing_ = failing;
}

// The kept events to a temporary file, renamed over the log: a crash leaves either file.
void IncidentFileWriter::WriteWhole(const std::string& content) {
  const std::string temp = path_ + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc | std::ios::binary);
    out << content;
    out.flush();
    if (!out.good()) {
      spdlog::error("msg=\"cannot compact the incident log\" file={}", LogfmtEscape(temp));
      std::remove(temp.c_str());
      return;
    }
  }
  file_.close();
  file_.clear();
  std::error_code ec;
  std::filesystem::rename(temp, path_, ec);
  if (ec) {
    spdlog::error("msg=\"cannot compact the incident log\" file={} error={}", LogfmtEscape(path_),
                  LogfmtEscape(ec.message()));
    std::remove(temp.c_str());
  }
  file_.open(path_, std::ios::app | std::ios::binary);
}

}  // namespace sbd
