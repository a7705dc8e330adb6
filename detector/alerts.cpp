#include "detector/alerts.h"

#include <sstream>

#include "detector/status.h"

namespace sbd {
namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// Every member's evidence in one line each: what on-call reads in the notification.
std::string Evidence(const ClusterSnapshot& c) {
  std::ostringstream out;
  out << c.assessment.summary << ".";
  if (c.spec.kind == ClusterKind::kPatroni) {
    if (c.assessment.lock_readable) {
      out << " Leader key (" << c.spec.dcs_namespace << "/" << c.spec.scope << "/leader) held by "
          << (c.assessment.lock_holder.empty() ? "nobody" : c.assessment.lock_holder);
      if (c.last_good_dcs) {
        out << ", lease " << c.last_good_dcs->lease_ttl_remaining << "s left, revision "
            << c.last_good_dcs->mod_revision;
      }
      out << ".";
    } else {
      out << " Lock store unreadable: " << c.assessment.lock_error << ".";
    }
  }
  for (const auto& member : c.spec.members) {
    auto it = c.history.members.find(member.name);
    if (it == c.history.members.end()) continue;
    const MemberHistory& h = it->second;
    out << "\n" << member.name << " (" << member.address << "): ";
    if (h.last && h.last->ok()) {
      const PostgresReading& r = *h.last->reading();
      out << (r.writable()    ? "writable"
              : r.in_recovery ? "replica"
                              : "read-only")
          << ", timeline " << r.timeline << ", system identifier " << r.system_identifier
          << ", WAL " << r.wal_lsn;
    } else if (h.last) {
      out << "unreadable (" << ReasonName(h.last->failure()->reason) << ")";
    }
    if (h.writable_since) out << ", writable since " << FormatTime(*h.writable_since);
    if (h.last_seen_writable && !(h.last && h.last->seen_writable())) {
      out << ", last seen writable " << FormatTime(*h.last_seen_writable);
    }
    if (h.last_seen_holding)
      out << ", last seen holding the lock " << FormatTime(*h.last_seen_holding);
    if (h.last_patroni && h.last_patroni->dcs_last_seen) {
      out << ", Patroni dcs_last_seen "
          << FormatTime(WallClock::time_point(std::chrono::duration_cast<WallClock::duration>(
                 std::chrono::duration<double>(*h.last_patroni->dcs_last_seen))));
    }
  }
  return out.str();
}

Alert Make(const ClusterSnapshot& c, const AlertingSpec& alerting, const AlertLinks& links,
           const std::string& name, const std::string& severity, const std::string& summary,
           const std::string& runbook) {
  Alert alert;
  for (const auto& [key, value] : alerting.external_labels) alert.labels[key] = value;
  alert.labels["alertname"] = name;
  alert.labels["severity"] = severity;
  alert.labels["cluster"] = c.spec.name;
  if (!c.spec.scope.empty()) alert.labels["scope"] = c.spec.scope;
  alert.annotations["summary"] = summary;
  alert.annotations["description"] = Evidence(c);
  alert.annotations["runbook_url"] = links.runbook_base_url + runbook;
  alert.generator_url = links.generator_url;
  return alert;
}

}  // namespace

std::vector<Alert> AlertsFor(const ClusterSnapshot& c, const AlertingSpec& alerting,
                             const AlertLinks& links) {
  std::vector<Alert> firing;
  if (!c.has_round) return firing;
  const Assessment& a = c.assessment;
  const bool persisted = c.verdict_rounds >= kWarningRounds;
  switch (a.verdict) {
    case Verdict::kSplitBrain: {
      std::string summary =
          "Split brain in " + c.spec.name + ": " + Join(a.writable) + " writable at once";
      if (!a.zombies.empty()) {
        summary += "; zombie " + Join(a.zombies) + ", lock holder " +
                   (a.lock_holder.empty() ? "unknown" : a.lock_holder);
      }
      firing.push_back(
          Make(c, alerting, links, "SplitBrain", "critical", summary, "split-brain.md"));
      break;
    }
    case Verdict::kSuspected:
      if (persisted) {
        firing.push_back(Make(c, alerting, links, "SplitBrainSuspected", "warning",
                              "Possible split brain in " + c.spec.name + ": " + a.summary,
                              "split-brain-suspected.md"));
      }
      break;
    case Verdict::kDrift:
      if (persisted) {
        firing.push_back(Make(c, alerting, links, "InventoryDrift", "warning",
                              "A writable member of another cluster is grouped under " +
                                  c.spec.name + ": " + Join(a.drift),
                              "inventory-drift.md"));
      }
      break;
    default:
      break;
  }
  if (c.spec.kind == ClusterKind::kPatroni && c.dcs_consecutive_failures >= kWarningRounds) {
    firing.push_back(Make(
        c, alerting, links, "LockStoreUnreadable", "warning",
        "Cannot read the lock store of " + c.spec.name + "; PostgreSQL is still probed directly",
        "lock-store-unreadable.md"));
  }
  return firing;
}

}  // namespace sbd
