#include "detector/output/incident_log.h"

#include <prometheus/metric_family.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "detector/common/json_text.h"
#include "detector/common/logfmt.h"
#include "detector/config/declaration.h"
#include "detector/output/status.h"

namespace sbd {
namespace {

constexpr size_t kMaxQueryLimit = 1000;
constexpr size_t kMaxClusterParam = 256;

// Names from the DCS are untrusted: invalid UTF-8 must not make a write throw.
std::string Dump(const nlohmann::json& json) { return JsonText(json); }

nlohmann::json NameList(const std::vector<std::string>& names) { return nlohmann::json(names); }

// A member's state from its observation: writable, read_only, standby, or unreadable.
std::string MemberState(const Observation& obs) {
  if (const PostgresReading* reading = obs.reading()) {
    if (reading->writable()) return "writable";
    return reading->in_recovery ? "standby" : "read_only";
  }
  if (const auto claim = obs.claim()) {
    return claim->writable() ? "writable" : claim->holds ? "fenced" : "standby";
  }
  return "unreadable";
}

WallClock::time_point RoundTime(const ClusterSnapshot& cluster, WallClock::time_point now) {
  return cluster.last_round_end == WallClock::time_point{} ? now : cluster.last_round_end;
}

nlohmann::json VerdictFields(const Assessment& a, const std::string& from) {
  nlohmann::json fields = {{"from", from}, {"to", VerdictName(a.verdict)}, {"summary", a.summary}};
  if (a.raw_verdict != a.verdict) fields["raw_verdict"] = VerdictName(a.raw_verdict);
  const std::pair<const char*, const std::vector<std::string>*> lists[] = {
      {"writable", &a.writable}, {"zombies", &a.zombies},       {"suspects", &a.suspects},
      {"drift", &a.drift},       {"unreadable", &a.unreadable}, {"other_scope", &a.other_scope},
  };
  for (const auto& [name, list] : lists) {
    if (!list->empty()) fields[name] = NameList(*list);
  }
  if (!a.lock_holder.empty()) fields["lock_holder"] = a.lock_holder;
  return fields;
}

// Member state changes of one round: members read this round against what was remembered.
// A member not probed this round keeps its state; one gone from the cluster is "removed".
void DiffMembers(const ClusterSnapshot& cluster, std::map<std::string, std::string>& members,
                 IncidentEvent base, std::vector<IncidentEvent>& out) {
  base.kind = "member_state_changed";
  std::set<std::string> present;
  for (const MemberSpec& m : cluster.spec.members) present.insert(m.name);
  for (const Observation& obs : cluster.last_round) {
    present.insert(obs.member);
    const std::string state = MemberState(obs);
    auto known = members.find(obs.member);
    if (known != members.end() && known->second != state) {
      IncidentEvent event = base;
      event.fields = {{"member", obs.member}, {"from", known->second}, {"to", state}};
      if (const ProbeFailure* failure = obs.failure()) {
        event.fields["reason"] = ReasonName(failure->reason);
      }
      out.push_back(std::move(event));
    }
    members[obs.member] = state;
  }
  for (auto it = members.begin(); it != members.end();) {
    if (present.count(it->first)) {
      ++it;
      continue;
    }
    IncidentEvent event = base;
    event.fields = {{"member", it->first}, {"from", it->second}, {"to", "removed"}};
    out.push_back(std::move(event));
    it = members.erase(it);
  }
}

}  // namespace

std::variant<IncidentQuery, std::string> ParseIncidentQuery(
    const std::multimap<std::string, std::string>& params) {
  IncidentQuery query;
  for (const auto& [key, value] : params) {
    if (params.count(key) > 1) return "parameter " + key + " is given more than once";
    if (key == "cluster") {
      if (value.empty() || value.size() > kMaxClusterParam) {
        return "cluster must be a cluster name of 1 to 256 bytes";
      }
      query.cluster = value;
    } else if (key == "since") {
      query.since = ParseRfc3339(value);
      if (!query.since) return "since must be an RFC 3339 time like 2026-11-30T06:00:00Z";
    } else if (key == "limit") {
      const bool digits = !value.empty() && value.size() <= 4 &&
                          value.find_first_not_of("0123456789") == std::string::npos;
      query.limit = digits ? std::stoul(value) : 0;
      if (query.limit < 1 || query.limit > kMaxQueryLimit) {
        return "limit must be a whole number from 1 to 1000";
      }
    } else {
      return "unknown parameter " + key + "; expected cluster, since or limit";
    }
  }
  return query;
}

IncidentLog::IncidentLog(IncidentLogSpec spec, WallClock::time_point now,
                         std::uintmax_t max_file_bytes, WriteHook before_write)
    : spec_(std::move(spec)) {
  if (spec_.file.empty()) return;
  writer_ =
      std::make_shared<IncidentFileWriter>(spec_.file, kMaxQueuedWrites, std::move(before_write));
  IncidentFileWriter::Start(writer_);
  IncidentFile file = ReadIncidentFile(spec_.file, spec_.retention, now, max_file_bytes);
  if (!file.error.empty()) {
    spdlog::error("msg=\"cannot read the incident log; starting empty\" file={} error={}",
                  LogfmtEscape(spec_.file), LogfmtEscape(file.error));
  }
  if (file.skipped_lines > 0) {
    spdlog::warn("msg=\"incident log lines skipped\" file={} skipped={}", LogfmtEscape(spec_.file),
                 file.skipped_lines);
  }
  skipped_lines_ = file.skipped_lines;
  file_lines_ = file.lines;
  // Over the cap only if max_events was lowered: the previous run counted its own drops.
  const size_t cap = static_cast<size_t>(std::max(spec_.max_events, 1));
  const size_t first = file.events.size() > cap ? file.events.size() - cap : 0;
  for (size_t i = 0; i < file.events.size(); ++i) {
    Restore(file.events[i]);
    if (i >= first) events_.push_back(std::move(file.events[i]));
  }
  std::lock_guard<std::mutex> lock(mu_);
  Prune(now);
  // Rewritten at once when anything read is not kept: expired, skipped or over the cap.
  if (file_lines_ != events_.size() || file.skipped_lines > 0) CompactFile();
}

IncidentLog::~IncidentLog() {
  if (writer_) writer_->Stop(Millis(5000));
}

bool IncidentLog::Flush(Millis timeout) const { return !writer_ || writer_->Flush(timeout); }

std::uint64_t IncidentLog::writes_replaced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_replaced_;
}

// What the file says a cluster was last: its verdict, incident and member states.
void IncidentLog::Restore(const IncidentEvent& event) {
  if (event.kind == "cluster_removed") {
    clusters_.erase(event.cluster);
    return;
  }
  ClusterMemory& memory = clusters_[event.cluster];
  const nlohmann::json& f = event.fields;
  auto text = [&](const char* key) { return IncidentField(f, key); };
  if (event.kind == "verdict_changed") memory.verdict = text("to");
  if (event.kind == "split_brain_opened") memory.split_brain_open = true;
  if (event.kind == "split_brain_closed") memory.split_brain_open = false;
  if (event.kind == "member_state_changed" && !text("member").empty()) {
    memory.members[text("member")] = text("to");
    if (text("to") == "removed") memory.members.erase(text("member"));
  }
  if (event.kind == "cluster_added") {
    memory.verdict = text("verdict");
    auto open = f.find("split_brain_open");
    memory.split_brain_open = open != f.end() && open->is_boolean() && open->get<bool>();
    memory.members.clear();
    auto members = f.find("members");
    if (members == f.end() || !members->is_object()) return;
    for (const auto& [name, state] : members->items()) {
      if (state.is_string()) memory.members[name] = state.get<std::string>();
    }
  }
}

namespace {

// Each remediation record that finished since the last round, once: an event with what was
// done (or would be) and its result. `logged` keeps the keys of the records still kept.
void DiffRemediations(const ClusterSnapshot& cluster, std::set<std::string>& logged,
                      const IncidentEvent& base, std::vector<IncidentEvent>& found) {
  std::set<std::string> kept;
  for (const RemediationRecord& r : cluster.remediation.records) {
    if (r.result == "running") continue;
    const std::string key = r.member + "|" + std::to_string(r.requested.time_since_epoch().count());
    kept.insert(key);
    if (logged.count(key)) continue;
    IncidentEvent event = base;
    event.time = r.finished;
    event.kind = "remediation";
    event.fields = {{"member", r.member},
                    {"holder", r.holder},
                    {"action", r.action},
                    {"mode", r.mode},
                    {"result", r.result},
                    {"detail", r.detail},
                    {"sessions_ended", r.sessions_ended},
                    {"verified", r.verified}};
    found.push_back(std::move(event));
  }
  logged = std::move(kept);
}

}  // namespace

void IncidentLog::ObserveRound(const ClusterSnapshot& cluster, WallClock::time_point now) {
  if (!cluster.has_round) return;
  const IncidentEvent base{RoundTime(cluster, now), cluster.spec.name, ""};
  std::vector<IncidentEvent> found;
  std::lock_guard<std::mutex> lock(mu_);
  auto known = clusters_.find(cluster.spec.name);
  if (known == clusters_.end()) {
    ClusterMemory& memory = clusters_[cluster.spec.name];
    memory.verdict = VerdictName(cluster.assessment.verdict);
    memory.split_brain_open = cluster.split_brain_open;
    DiffMembers(cluster, memory.members, base, found);  // a first sighting: no changes
    IncidentEvent added = base;
    added.kind = "cluster_added";
    added.fields = {{"verdict", memory.verdict},
                    {"summary", cluster.assessment.summary},
                    {"split_brain_open", memory.split_brain_open},
                    {"members", memory.members}};
    Append({std::move(added)}, now);
    return;
  }
  ClusterMemory& memory = known->second;
  const std::string verdict = VerdictName(cluster.assessment.verdict);
  if (verdict != memory.verdict) {
    IncidentEvent event = base;
    event.kind = "verdict_changed";
    event.fields = VerdictFields(cluster.assessment, memory.verdict);
    found.push_back(std::move(event));
    memory.verdict = verdict;
  }
  if (cluster.split_brain_open != memory.split_brain_open) {
    IncidentEvent event = base;
    event.kind = cluster.split_brain_open ? "split_brain_opened" : "split_brain_closed";
    event.fields = {{"writable", NameList(cluster.assessment.writable)}};
    if (!cluster.assessment.zombies.empty()) {
      event.fields["zombies"] = NameList(cluster.assessment.zombies);
    }
    found.push_back(std::move(event));
    memory.split_brain_open = cluster.split_brain_open;
  }
  DiffMembers(cluster, memory.members, base, found);
  DiffRemediations(cluster, memory.remediations, base, found);
  Append(std::move(found), now);
}

void IncidentLog::SetClusters(const std::vector<ClusterSpec>& clusters, WallClock::time_point now) {
  std::set<std::string> names;
  for (const ClusterSpec& c : clusters) names.insert(c.name);
  std::vector<IncidentEvent> removed;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = clusters_.begin(); it != clusters_.end();) {
    if (names.count(it->first)) {
      ++it;
      continue;
    }
    removed.push_back({now, it->first, "cluster_removed", {{"verdict", it->second.verdict}}});
    it = clusters_.erase(it);
  }
  Append(std::move(removed), now);
}

// Requires mu_.
void IncidentLog::Append(std::vector<IncidentEvent> events, WallClock::time_point now) {
  if (!events.empty()) {
    // Kept first: a full queue turns this append into a rewrite of events_, these included.
    for (const IncidentEvent& event : events) events_.push_back(event);
    AppendToFile(events);
  }
  Prune(now);
}

// Requires mu_. Drops what is past the retention or over the cap, oldest first; rewrites the
// file once dropped lines make up half of it.
void IncidentLog::Prune(WallClock::time_point now) {
  const auto cutoff = now - spec_.retention;
  while (!events_.empty() && events_.front().time < cutoff) events_.pop_front();
  const size_t cap = static_cast<size_t>(std::max(spec_.max_events, 1));
  while (events_.size() > cap) {
    events_.pop_front();
    ++dropped_;
  }
  if (!spec_.file.empty() && file_lines_ > 2 * events_.size() + 16) CompactFile();
}

// Requires mu_. Queued for the writer, never written here: the caller is a round.
void IncidentLog::AppendToFile(const std::vector<IncidentEvent>& events) {
  if (!writer_) return;
  std::string lines;
  for (const IncidentEvent& event : events) lines += IncidentFileLine(event);
  file_lines_ += events.size();
  // A full queue (a slow or hung disk): everything kept is rewritten instead, once it moves.
  if (!writer_->Append(std::move(lines))) CompactFile();
}

// Requires mu_. Queues a rewrite of the kept events, replacing what waits in the queue.
void IncidentLog::CompactFile() {
  if (!writer_) return;
  std::string content;
  for (const IncidentEvent& event : events_) content += IncidentFileLine(event);
  const size_t replaced = writer_->Rewrite(std::move(content));
  if (replaced > 0 && writes_replaced_ == 0) {
    spdlog::warn(
        "msg=\"incident log writes back up; the file is rewritten whole once the disk moves\" "
        "file={}",
        LogfmtEscape(spec_.file));
  }
  writes_replaced_ += replaced;
  // After a failed write too: tried again once as many lines are dropped, not at every round.
  file_lines_ = events_.size();
}

std::vector<IncidentEvent> IncidentLog::Events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {events_.begin(), events_.end()};
}

std::vector<IncidentEvent> IncidentLog::EventsOf(const std::set<std::string>& clusters) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<IncidentEvent> out;
  for (const IncidentEvent& e : events_) {
    if (clusters.count(e.cluster)) out.push_back(e);
  }
  return out;
}

nlohmann::json IncidentLog::Query(const IncidentQuery& query) const {
  nlohmann::json events = nlohmann::json::array();
  bool truncated = false;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
    // Not break: rounds of different clusters may land slightly out of time order.
    if (query.since && it->time < *query.since) continue;
    if (!query.cluster.empty() && it->cluster != query.cluster) continue;
    if (events.size() == query.limit) {
      truncated = true;
      break;
    }
    events.push_back(IncidentEventJson(*it));
  }
  return {{"events", events},
          {"truncated", truncated},
          {"kept", events_.size()},
          {"retention", FormatDuration(spec_.retention)},
          {"max_events", spec_.max_events},
          {"dropped_total", dropped_},
          {"skipped_lines_total", skipped_lines_},
          {"file", spec_.file}};
}

std::pair<int, std::string> IncidentLog::HttpGet(
    const std::multimap<std::string, std::string>& params) const {
  auto query = ParseIncidentQuery(params);
  if (const std::string* error = std::get_if<std::string>(&query)) {
    return {400, Dump(nlohmann::json{{"error", *error}}) + "\n"};
  }
  return {200, JsonText(Query(std::get<IncidentQuery>(query)), 2) + "\n"};
}

std::uint64_t IncidentLog::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

std::uint64_t IncidentLog::skipped_lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return skipped_lines_;
}

size_t IncidentLog::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

namespace {

class IncidentLogMetrics : public prometheus::Collectable {
 public:
  IncidentLogMetrics(std::shared_ptr<prometheus::Collectable> inner,
                     std::shared_ptr<const IncidentLog> log)
      : inner_(std::move(inner)), log_(std::move(log)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families = inner_->Collect();
    families.push_back(Family("splitbrain_incident_log_events", "Events the incident log keeps",
                              prometheus::MetricType::Gauge, static_cast<double>(log_->size())));
    families.push_back(Family("splitbrain_incident_log_dropped_total",
                              "Incident log events dropped, oldest first, to stay under max_events",
                              prometheus::MetricType::Counter,
                              static_cast<double>(log_->dropped())));
    families.push_back(Family("splitbrain_incident_log_writes_replaced_total",
                              "Incident log appends that waited behind a slow disk and were "
                              "replaced by one rewrite of every kept event",
                              prometheus::MetricType::Counter,
                              static_cast<double>(log_->writes_replaced())));
    families.push_back(Family("splitbrain_incident_log_skipped_lines_total",
                              "Incident log file lines skipped at start as corrupt or unknown",
                              prometheus::MetricType::Counter,
                              static_cast<double>(log_->skipped_lines())));
    return families;
  }

 private:
  static prometheus::MetricFamily Family(const char* name, const char* help,
                                         prometheus::MetricType type, double value) {
    prometheus::MetricFamily family{name, help, type, {}};
    prometheus::ClientMetric metric;
    if (type == prometheus::MetricType::Counter) {
      metric.counter.value = value;
    } else {
      metric.gauge.value = value;
    }
    family.metric.push_back(metric);
    return family;
  }
  std::shared_ptr<prometheus::Collectable> inner_;
  std::shared_ptr<const IncidentLog> log_;
};

// One event as a line of the check command's summary.
std::string EventLine(const IncidentEvent& e) {
  const nlohmann::json& f = e.fields;
  std::string what;
  if (e.kind == "verdict_changed") {
    what = IncidentField(f, "from") + " -> " + IncidentField(f, "to") + ": " +
           IncidentField(f, "summary");
  } else if (e.kind == "member_state_changed") {
    what = IncidentField(f, "member") + " " + IncidentField(f, "from") + " -> " +
           IncidentField(f, "to");
    if (!IncidentField(f, "reason").empty()) what += " (" + IncidentField(f, "reason") + ")";
  } else if (e.kind == "remediation") {
    what = IncidentField(f, "mode") + " " + IncidentField(f, "member") + ": " +
           IncidentField(f, "result") + " (" + IncidentField(f, "detail") + ")";
  } else {
    what = Dump(f);
  }
  return "  " + FormatTime(e.time) + "  " + e.kind + "  " + what + "\n";
}

}  // namespace

std::shared_ptr<prometheus::Collectable> WithIncidentLogMetrics(
    std::shared_ptr<prometheus::Collectable> inner, std::shared_ptr<const IncidentLog> log) {
  return std::make_shared<IncidentLogMetrics>(std::move(inner), std::move(log));
}

std::string IncidentSummaryText(const std::vector<ClusterSnapshot>& clusters,
                                const IncidentLogSpec& spec, size_t per_cluster,
                                WallClock::time_point now) {
  std::vector<std::string> unhealthy;
  for (const auto& c : clusters) {
    if (c.assessment.verdict != Verdict::kHealthy) unhealthy.push_back(c.spec.name);
  }
  if (unhealthy.empty()) return "";
  std::ostringstream out;
  if (spec.file.empty()) {
    out << "\nRecent incidents: none recorded (no incident_log.file configured; check probes "
           "once and keeps no history)\n";
    return out.str();
  }
  const IncidentFile file = ReadIncidentFile(spec.file, spec.retention, now);
  out << "\nRecent incidents (from " << spec.file << "):\n";
  if (!file.error.empty()) out << "  " << file.error << "\n";
  for (const std::string& name : unhealthy) {
    std::vector<const IncidentEvent*> mine;
    for (const auto& e : file.events) {
      if (e.cluster == name) mine.push_back(&e);
    }
    out << name << ":\n";
    if (mine.empty()) out << "  none recorded\n";
    const size_t first = mine.size() > per_cluster ? mine.size() - per_cluster : 0;
    for (size_t i = first; i < mine.size(); ++i) out << EventLine(*mine[i]);
  }
  return out.str();
}

}  // namespace sbd
