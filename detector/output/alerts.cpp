#include "detector/output/alerts.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "detector/common/logfmt.h"
#include "detector/common/network_text.h"
#include "detector/config/claim_words.h"
#include "detector/output/remediation_output.h"
#include "detector/output/status.h"

namespace sbd {
namespace {

// The pages: the critical alerts (PageLabelSets lists them for the silence check).
constexpr const char* kSplitBrain = "SplitBrain";
constexpr const char* kFencingTokenRegressed = "FencingTokenRegressed";
constexpr const char* kCritical = "critical";

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// A byte count as its power-of-two floor ("at least 16 MiB"): it changes only when the
// damage doubles, so a growing count re-sends the page on news, not on every round.
std::string AtLeast(std::uint64_t bytes) {
  if (bytes == 0) return "0 bytes";
  std::uint64_t floor = 1;
  while (floor <= bytes / 2) floor *= 2;
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (floor >= 1024) {
    floor /= 1024;
    ++unit;
  }
  return "at least " + std::to_string(floor) + " " + units[unit];
}

// How long two have been writable, floored to a whole resend interval: the description then
// changes once per interval, so every resend carries the figure so far and no round re-sends.
std::string DoubleWriteSoFar(double seconds, Millis resend_interval) {
  const double step = std::max(1.0, std::chrono::duration<double>(resend_interval).count());
  const auto shown = [](double s) { return std::to_string(static_cast<long long>(s)) + " s"; };
  if (seconds < step) return "under " + shown(step) + " so far";
  return "at least " + shown(std::floor(seconds / step) * step) + " so far";
}

// How bad it is: the fork point, when two became writable and for how long so far, and each
// holder's WAL since the fork (or why it is unknown).
std::string WriteWindowEvidence(const WriteWindow& w, Millis resend_interval) {
  std::ostringstream out;
  out << "\nWrite window: "
      << (w.ForkPoint().empty() ? w.fork_unknown_reason : "fork at " + w.ForkPoint());
  std::optional<WallClock::time_point> both_since;
  for (const auto& h : w.holders) {
    if (h.first_writable)
      both_since = std::max(both_since.value_or(*h.first_writable), *h.first_writable);
  }
  if (w.double_write_seconds && both_since) {
    out << "; two writable since " << FormatTime(*both_since) << ", "
        << DoubleWriteSoFar(*w.double_write_seconds, resend_interval);
  }
  out << ".";
  for (const auto& h : w.holders) {
    out << " " << h.member << ": "
        << (h.wal_bytes_since_fork
                ? AtLeast(*h.wal_bytes_since_fork) + " of " + w.written + " since the fork"
                : w.written + " since the fork unknown (" + h.unknown_reason + ")")
        << ".";
  }
  return out.str();
}

// Every member's evidence in one line each: what on-call reads in the notification. Only
// facts that stay put while the incident lasts (no exact WAL position, lease countdown or
// live heartbeat; WAL and the double-write time in coarse steps), so the pusher re-sends on
// real news and at its resend interval, not on every round.
std::string Evidence(const ClusterSnapshot& c, Millis resend_interval) {
  const Assessment& a = c.assessment;
  std::ostringstream out;
  out << a.summary << ".";
  if (c.lock.has_store) {
    if (a.lock_readable) {
      out << " Leader key (" << c.lock.record << ") held by "
          << (a.lock_holder.empty() ? "nobody" : a.lock_holder);
      if (c.last_good_dcs) out << ", revision " << c.last_good_dcs->mod_revision;
      if (c.last_good_dcs && !c.last_good_dcs->holder_token.empty()) {
        out << ", token " << ShownToken(c.last_good_dcs->holder_token);
      }
      out << ".";
    } else {
      // The store's reason (a probe's message: never a secret), so that the page says why.
      out << " Lock store unreadable" << (a.lock_error.empty() ? "" : ": " + a.lock_error) << ".";
    }
  }
  for (const auto& member : c.spec.members) {
    auto it = c.history.members.find(member.name);
    if (it == c.history.members.end()) continue;
    const MemberHistory& h = it->second;
    const bool zombie =
        std::find(a.zombies.begin(), a.zombies.end(), member.name) != a.zombies.end();
    out << "\n" << member.name << " (" << RedactedUrl(member.address) << "): ";
    if (h.last && h.last->ok() && !h.last->reading()) {
      const Claim c = *h.last->claim();
      out << (c.writable() ? "holder"
              : c.holds    ? "fenced holder"
                           : "not holder")
          << ", lineage " << c.lineage;
      if (!c.token.empty()) out << ", token " << ShownToken(c.token);
    } else if (h.last && h.last->ok()) {
      const PostgresReading& r = *h.last->reading();
      out << (r.writable()    ? "writable"
              : r.in_recovery ? "replica"
                              : "read-only")
          << ", timeline " << r.timeline << ", system identifier " << r.system_identifier;
    } else if (h.last) {
      out << "unreadable (" << ReasonName(h.last->failure()->reason) << ")";
    }
    const ClaimWords& words = ClaimWordsOf(c.spec.kind);
    if (zombie) out << ", ZOMBIE (" << words.zombie << ")";
    if (h.writable_since) out << ", " << words.since << " " << FormatTime(*h.writable_since);
    if (h.last_seen_writable && !(h.last && h.last->seen_writable())) {
      out << ", last seen writable " << FormatTime(*h.last_seen_writable);
    }
    // The holder's own timestamps move every round; a zombie's are frozen and tell the story.
    if (member.name != a.lock_holder) {
      if (h.last_seen_holding) {
        out << ", last seen holding the lock " << FormatTime(*h.last_seen_holding);
      }
      if (zombie && h.last_patroni && h.last_patroni->dcs_last_seen) {
        out << ", its Patroni last reached the DCS at "
            << FormatTime(WallClock::time_point(std::chrono::duration_cast<WallClock::duration>(
                   std::chrono::duration<double>(*h.last_patroni->dcs_last_seen))));
      }
    }
  }
  if (a.resource_token) {
    out << "\nThe resource's highest accepted token: " << *a.resource_token;
    if (!a.fencing_warning.empty()) out << " (not believed: " << a.fencing_warning << ")";
    if (!a.fenced_zombies.empty())
      out << "; fenced (their writes refused): " << Join(a.fenced_zombies);
    out << ".";
  }
  for (const std::string& regression : a.fencing_regressions) {
    out << "\nFence broken: " << regression << ".";
  }
  if (c.write_window) out << WriteWindowEvidence(*c.write_window, resend_interval);
  out << RemediationEvidence(c);
  return out.str();
}

// Application leases: the token each holder claims with and the one the record holds, so that
// the page tells the zombie's token from the holder's. Empty when the claims carry none.
std::string TokenEvidence(const ClusterSnapshot& c) {
  std::string out;
  for (const auto& member : c.assessment.writable) {
    auto it = c.history.members.find(member);
    if (it == c.history.members.end() || !it->second.last_claim) continue;
    const std::string& token = it->second.last_claim->token;
    if (token.empty()) continue;
    out += (out.empty() ? "" : ", ") + member + " claims with token " + ShownToken(token);
  }
  if (out.empty()) return out;
  if (c.last_good_dcs && !c.last_good_dcs->holder_token.empty()) {
    out += "; the key holds token " + ShownToken(c.last_good_dcs->holder_token);
  }
  return "; " + out;
}

Alert Make(const ClusterSnapshot& c, const AlertingSpec& alerting, const AlertLinks& links,
           const std::string& name, const std::string& severity, const std::string& summary,
           const std::string& runbook) {
  Alert alert;
  alert.labels = AlertLabels(c.spec, c.lock.kind, alerting, name, severity);
  alert.annotations["summary"] = summary;
  alert.annotations["description"] = Evidence(c, alerting.resend_interval);
  alert.annotations["runbook_url"] = links.runbook_base_url + runbook;
  alert.generator_url = links.generator_url;
  return alert;
}

}  // namespace

std::map<std::string, std::string> AlertLabels(const ClusterSpec& spec,
                                               const std::string& lock_kind,
                                               const AlertingSpec& alerting,
                                               const std::string& alertname,
                                               const std::string& severity) {
  std::map<std::string, std::string> labels;
  for (const auto& [key, value] : alerting.external_labels) labels[key] = value;
  labels["alertname"] = alertname;
  labels["severity"] = severity;
  labels["cluster"] = spec.name;
  if (!spec.scope.empty()) labels["scope"] = spec.scope;
  // The registry's name for the kind, as splitbrain_cluster_info exports it: the rules copy it
  // from there, so both paths carry the same label set.
  if (!lock_kind.empty()) labels["lock_kind"] = lock_kind;
  return labels;
}

std::vector<std::map<std::string, std::string>> PageLabelSets(const ClusterSpec& spec,
                                                              const AlertingSpec& alerting) {
  std::vector<std::map<std::string, std::string>> out;
  for (const char* page : {kSplitBrain, kFencingTokenRegressed}) {
    // The kind the scheduler describes the cluster's lock with (DescribeLock), as it runs.
    out.push_back(AlertLabels(spec, DescribeLock(spec, false).kind, alerting, page, kCritical));
  }
  return out;
}

bool VerdictPersisted(const ClusterSnapshot& c) {
  // In time, not only in rounds: a lock-store watch's follow-up rounds come every 100 ms, and
  // a switchover's restart must not become a warning by being seen often. Three rounds at the
  // probe interval are two intervals apart; half an interval is left for their jitter.
  const auto interval = std::chrono::duration_cast<WallClock::duration>(c.timing().probe_interval);
  const auto held = c.last_round_end - c.verdict_since;
  return c.verdict_rounds >= kWarningRounds &&
         held >= interval * static_cast<int>(kWarningRounds - 1) - interval / 2;
}

namespace {

// What the remediation did in this incident, for the page's summary: "; fenced node2 (writes
// refused)", or what it would have done, or why it could not.
std::string RemediationSummary(const ClusterSnapshot& c) {
  std::string out;
  for (const RemediationRecord& r : RecentRemediations(c)) {
    if (r.result == "fenced" && r.action == "hook") {
      out += "; asked the hook to stop " + r.member + " at " + FormatTime(r.finished) +
             " (it answered; not verified)";
    } else if (r.result == "fenced") {
      out += "; fenced " + r.member + " at " + FormatTime(r.finished) + " (writes refused)";
    } else if (r.result == "dry_run") {
      out += "; dry run: would fence " + r.member;
    } else if (r.result != "running") {
      out += "; fencing " + r.member + ": " + r.result;
    }
  }
  return out;
}

// ZombieFenced (a fence the detector made in the last hour) and RemediationCapReached (an
// action held back by the fleet cap in the cap's window): warnings, beside any page.
void AddRemediationAlerts(const ClusterSnapshot& c, const AlertingSpec& alerting,
                          const AlertLinks& links, std::vector<Alert>& firing) {
  const auto now = WallClock::now();
  std::vector<std::string> fenced;
  std::vector<std::string> hooked;  // handed to the operator's hook: not seen to refuse writes
  std::vector<std::string> undo;
  std::vector<std::string> capped;
  for (const RemediationRecord& r : c.remediation.records) {
    if (r.result == "fenced" && r.finished + std::chrono::hours(1) > now) {
      (r.action == "hook" ? hooked : fenced).push_back(r.member + " at " + FormatTime(r.finished));
      if (!r.undo.empty()) undo.push_back(r.member + ": " + r.undo);
    }
    if (r.result == "capped" && r.finished + std::chrono::minutes(10) > now) {
      capped.push_back(r.member + " at " + FormatTime(r.finished));
    }
  }
  if (!fenced.empty() || !hooked.empty()) {
    std::string said;
    if (!fenced.empty()) {
      said = "The detector fenced " + Join(fenced) + " in " + c.spec.name +
             ": it refuses writes until undone";
    }
    if (!hooked.empty()) {
      said +=
          (said.empty() ? "The detector asked the hook to stop " : "; it asked the hook to stop ") +
          Join(hooked) + (said.empty() ? " in " + c.spec.name : "") +
          ": the hook answered, and the incident stays open while the zombie still claims";
    }
    firing.push_back(Make(c, alerting, links, "ZombieFenced", "warning",
                          said + " (undo: " + (undo.empty() ? "none given" : Join(undo)) + ")",
                          "zombie-fenced.md"));
  }
  if (!capped.empty()) {
    firing.push_back(Make(c, alerting, links, "RemediationCapReached", "warning",
                          "Not fenced in " + c.spec.name + ": " + Join(capped) +
                              "; the fleet-wide remediation cap is reached",
                          "remediation-cap-reached.md"));
  }
}

// The double holder's alerts: SplitBrain (the page, for the whole incident), SplitBrainFenced
// and FencingTokenRegressed. Returns whether it paged.
bool AddSplitBrainAlerts(const ClusterSnapshot& c, const AlertingSpec& alerting,
                         const AlertLinks& links, std::vector<Alert>& firing) {
  const Assessment& a = c.assessment;
  const size_t before = firing.size();
  // The page stays up for the whole incident, not only for the rounds that confirm it.
  const bool split_brain = a.verdict == Verdict::kSplitBrain && !a.split_brain_fenced;
  if (split_brain || c.split_brain_open) {
    // The zombie is named whenever this round still sees one, confirmed or not: a page that
    // goes out in a round whose re-probe did not overlap must still say whom to stop. When this
    // round sees none (the zombie turned unreadable mid-incident), the incident's last named
    // zombie is, with when it was named: Alertmanager may deliver the first page with a later
    // round's text.
    std::string zombie;
    if (!a.zombies.empty()) {
      zombie = "; zombie " + Join(a.zombies) + ", lock holder " +
               (a.lock_holder.empty() ? "unknown" : a.lock_holder);
    } else if (c.split_brain_open && !c.split_brain_zombies.empty()) {
      zombie = "; zombie " + Join(c.split_brain_zombies) + " (last seen at " +
               FormatTime(c.split_brain_zombies_at) + "), lock holder " +
               (c.split_brain_holder.empty() ? "unknown" : c.split_brain_holder);
    }
    std::string summary = "Split brain in " + c.spec.name + ": ";
    if (split_brain) {
      summary += Join(a.writable) + " " + ClaimWordsOf(c.spec.kind).many + " at once" + zombie +
                 TokenEvidence(c);
    } else {
      summary += "confirmed at " + FormatTime(c.split_brain_opened_at) +
                 ", not yet seen to be over (" + std::string(VerdictName(a.verdict)) + ")" + zombie;
    }
    summary += RemediationSummary(c);
    firing.push_back(Make(c, alerting, links, kSplitBrain, kCritical, summary, "split-brain.md"));
  }
  const bool paged = firing.size() > before;
  if (!paged && a.verdict == Verdict::kSplitBrain && a.split_brain_fenced) {
    // The resource refuses every zombie's token: a double holder that can do no harm.
    firing.push_back(Make(c, alerting, links, "SplitBrainFenced", "warning",
                          "Fenced double holder in " + c.spec.name + ": " + Join(a.writable) +
                              " claim at once; zombie " + Join(a.zombies) + ", lock holder " +
                              a.lock_holder + TokenEvidence(c) +
                              "; the resource's highest accepted token is " +
                              std::to_string(*a.resource_token) + ", so it refuses the zombie",
                          "split-brain-fenced.md"));
  }
  if (!a.fencing_regressions.empty()) {
    std::string what;
    for (const auto& r : a.fencing_regressions) what += (what.empty() ? "" : "; ") + r;
    firing.push_back(Make(c, alerting, links, kFencingTokenRegressed, kCritical,
                          "The fence of " + c.spec.name + " is broken: " + what,
                          "fencing-token-regressed.md"));
  }
  return paged;
}

// The warnings, none while the cluster pages: a suppressed split brain, a suspected one,
// drift, a forked lineage, an unreadable lock store.
void AddWarnings(const ClusterSnapshot& c, const AlertingSpec& alerting, const AlertLinks& links,
                 bool paged, std::vector<Alert>& firing) {
  const Assessment& a = c.assessment;
  const bool persisted = VerdictPersisted(c);
  switch (paged ? Verdict::kHealthy : a.verdict) {
    case Verdict::kSuppressed:
      // A declaration keeps a confirmed split brain from paging, never from being seen.
      if (a.suppressed_split_brain) {
        std::string reasons;
        for (const auto& s : a.suppressions) {
          if (s.declaration_id.empty() || s.hidden != VerdictName(Verdict::kSplitBrain)) continue;
          reasons += (reasons.empty() ? "" : "; ") + s.kind + " " + s.declaration_id + ": " +
                     s.reason + " (until " + FormatTime(s.expires) + ")";
        }
        firing.push_back(Make(c, alerting, links, "SplitBrainSuppressed", "warning",
                              "Split brain in " + c.spec.name +
                                  " inside a declared window: " + Join(a.writable) + " " +
                                  ClaimWordsOf(c.spec.kind).many + " at once; " + reasons,
                              "split-brain-suppressed.md"));
      }
      break;
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
  if (c.fork_rounds >= kWarningRounds) {
    std::string where;
    for (const auto& f : c.forks) {
      if (f.declared_by) continue;
      where += (where.empty() ? "" : "; ") + std::string("lineage ") + f.lineage + " (" +
               Join(f.members) + ") also writable in " + Join(f.with) +
               (f.with_total > f.with.size()
                    ? " and " + std::to_string(f.with_total - f.with.size()) + " more"
                    : "");
    }
    firing.push_back(Make(
        c, alerting, links, "LineageForked", "warning",
        "Lineage of " + c.spec.name + " writable in two places, a cutover not declared: " + where,
        "lineage-forked.md"));
  }
  if (c.lock.has_store && c.dcs_consecutive_failures >= kWarningRounds) {
    firing.push_back(Make(
        c, alerting, links, "LockStoreUnreadable", "warning",
        "Cannot read the lock store of " + c.spec.name + "; PostgreSQL is still probed directly",
        "lock-store-unreadable.md"));
  }
}

}  // namespace

std::vector<Alert> AlertsFor(const ClusterSnapshot& c, const AlertingSpec& alerting,
                             const AlertLinks& links) {
  std::vector<Alert> firing;
  if (!c.has_round) return firing;
  const bool paged = AddSplitBrainAlerts(c, alerting, links, firing);
  AddWarnings(c, alerting, links, paged, firing);
  AddRemediationAlerts(c, alerting, links, firing);
  return firing;
}

}  // namespace sbd
