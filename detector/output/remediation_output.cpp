#include "detector/output/remediation_output.h"

#include "detector/output/metric_family.h"
#include "detector/output/status.h"

namespace sbd {

using metric_family::Family;
using prometheus::MetricType;

namespace {

constexpr auto kRecentWithoutIncident = std::chrono::hours(1);

std::string Undo(const RemediationRecord& r) {
  return r.undo.empty() ? "" : "; undo on " + r.member + ": " + r.undo;
}

std::string Line(const RemediationRecord& r) {
  std::string out = FormatTime(r.requested) + " " + r.mode + " " + r.member + ": " + r.result;
  if (!r.detail.empty()) out += " (" + r.detail + ")";
  if (r.sessions_ended > 0) out += ", " + std::to_string(r.sessions_ended) + " sessions ended";
  return out + Undo(r);
}

}  // namespace

std::vector<prometheus::MetricFamily> RemediationFamilies(
    const std::vector<ClusterSnapshot>& clusters) {
  Family actions("splitbrain_remediations_total",
                 "Remediation actions on confirmed zombies, by action and result (fenced, "
                 "failed, not_primary, dry_run, capped).",
                 MetricType::Counter);
  Family mode("splitbrain_remediation_mode",
              "1 for the cluster's remediation mode (dry_run or fence) when it has one.",
              MetricType::Gauge);
  for (const ClusterSnapshot& c : clusters) {
    const RemediationView& view = c.remediation;
    for (const auto& [key, count] : view.counts) {
      actions.Add({{"cluster", c.spec.name}, {"action", key.first}, {"result", key.second}},
                  static_cast<double>(count));
    }
    if (c.spec.remediation.mode != RemediationMode::kOff) {
      mode.Add({{"cluster", c.spec.name}, {"mode", RemediationModeName(c.spec.remediation.mode)}},
               1);
    }
  }
  return metric_family::TakeAll({&actions, &mode});
}

std::vector<RemediationRecord> RecentRemediations(const ClusterSnapshot& c) {
  const WallClock::time_point since =
      c.split_brain_open ? c.split_brain_opened_at : WallClock::now() - kRecentWithoutIncident;
  std::vector<RemediationRecord> out;
  for (const RemediationRecord& r : c.remediation.records) {
    if (r.requested >= since) out.push_back(r);
  }
  return out;
}

std::string RemediationEvidence(const ClusterSnapshot& c) {
  std::string out;
  for (const RemediationRecord& r : RecentRemediations(c)) out += "\nRemediation: " + Line(r) + ".";
  if (out.empty() && c.split_brain_open && !c.remediation.hold.empty() &&
      c.remediation.mode != RemediationMode::kOff) {
    out = "\nRemediation (" + std::string(RemediationModeName(c.remediation.mode)) +
          "): nothing done: " + c.remediation.hold + ".";
  }
  return out;
}

nlohmann::json RemediationJson(const RemediationView& view) {
  if (view.mode == RemediationMode::kOff && view.records.empty()) return nullptr;
  nlohmann::json records = nlohmann::json::array();
  for (const RemediationRecord& r : view.records) {
    nlohmann::json record = {{"member", r.member},
                             {"holder", r.holder},
                             {"action", r.action},
                             {"mode", r.mode},
                             {"result", r.result},
                             {"detail", r.detail},
                             {"requested", FormatTime(r.requested)},
                             {"sessions_ended", r.sessions_ended},
                             {"verified", r.verified}};
    if (r.finished != WallClock::time_point{}) record["finished"] = FormatTime(r.finished);
    if (!r.undo.empty()) record["undo"] = r.undo;
    records.push_back(std::move(record));
  }
  nlohmann::json out = {{"mode", RemediationModeName(view.mode)},
                        {"action", view.action},
                        {"records", std::move(records)}};
  if (!view.hold.empty()) out["hold"] = view.hold;
  return out;
}

}  // namespace sbd
