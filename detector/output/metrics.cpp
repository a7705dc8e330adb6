#include "detector/output/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "detector/common/build_info.h"
#include "detector/common/internal_errors.h"
#include "detector/common/network_text.h"
#include "detector/output/metric_family.h"
#include "detector/output/remediation_output.h"

namespace sbd {
namespace {

using metric_family::Append;
using metric_family::Family;
using metric_family::TakeAll;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

double Seconds(WallClock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// The detector's own health: internal errors and discovery's limits.
std::vector<MetricFamily> RuntimeHealthFamilies(const std::vector<ClusterSnapshot>& clusters) {
  Family internal("splitbrain_internal_errors_total",
                  "Exceptions caught by the last-resort handlers (the detector carried on; "
                  "the log says where).",
                  MetricType::Counter);
  internal.Add({}, static_cast<double>(InternalErrors()));
  Family rejected("splitbrain_discovery_members_rejected",
                  "Members the DCS registers beyond discovery.max_members, not probed.",
                  MetricType::Gauge);
  Family expired("splitbrain_discovery_members_expired_total",
                 "Discovered members dropped after being gone from the DCS and unreadable for "
                 "discovery.expire_after.",
                 MetricType::Counter);
  for (const auto& c : clusters) {
    if (!c.spec.discovery.enabled) continue;
    rejected.Add({{"cluster", c.spec.name}}, static_cast<double>(c.discovery_rejected.size()));
    expired.Add({{"cluster", c.spec.name}}, static_cast<double>(c.discovered_expired));
  }
  return {internal.Take(), rejected.Take(), expired.Take()};
}

// Labels of one member of one cluster.
std::vector<ClientMetric::Label> MemberLabels(const std::string& cluster,
                                              const std::string& member) {
  return {{"cluster", cluster}, {"member", member}};
}

// The member's history once it has been probed at least once, else nullptr.
const MemberHistory* ProbedHistory(const ClusterSnapshot& c, const std::string& member) {
  const auto h = c.history.members.find(member);
  if (h == c.history.members.end() || !h->second.last) return nullptr;
  return &h->second;
}

// The member's counters, or nullptr before its first probe.
const MemberCounters* CountersOf(const ClusterSnapshot& c, const std::string& member) {
  const auto counters = c.counters.find(member);
  return counters == c.counters.end() ? nullptr : &counters->second;
}

// The running build and whether the last config load worked.
std::vector<MetricFamily> BuildAndReloadFamilies(const ConfigReloadStatus* reload_status) {
  Family build("splitbrain_build_info", "Build of the running detector.", MetricType::Gauge);
  const BuildInfo& built = GetBuildInfo();
  build.Add({{"version", built.version},
             {"revision", built.revision},
             {"branch", built.branch},
             {"compiler", built.compiler}},
            1);

  Family reload_ok("splitbrain_config_last_reload_successful",
                   "Whether the last configuration load succeeded (the last good one stays "
                   "in force otherwise).",
                   MetricType::Gauge);
  Family reload_ts("splitbrain_config_last_reload_success_timestamp_seconds",
                   "When the configuration was last loaded successfully.", MetricType::Gauge);
  if (reload_status != nullptr) {
    reload_ok.Add({}, reload_status->last_successful.load() ? 1 : 0);
    reload_ts.Add({}, reload_status->last_success_timestamp.load());
  }
  return TakeAll({&build, &reload_ok, &reload_ts});
}

// Per cluster: the verdict, its rounds and their timing, and the configured cadence.
std::vector<MetricFamily> ClusterRoundFamilies(const std::vector<ClusterSnapshot>& clusters) {
  Family verdict("splitbrain_cluster_verdict",
                 "1 for the cluster's current verdict, 0 for the others.", MetricType::Gauge);
  Family verdict_since("splitbrain_cluster_verdict_since_timestamp_seconds",
                       "When the cluster's current verdict began.", MetricType::Gauge);
  Family writable_lineage("splitbrain_cluster_writable_members",
                          "Members seen writable in the last round, per system identifier.",
                          MetricType::Gauge);
  Family members_total("splitbrain_cluster_members", "Members configured in the cluster.",
                       MetricType::Gauge);
  Family rounds("splitbrain_rounds_total", "Probe rounds completed.", MetricType::Counter);
  Family round_ts("splitbrain_round_last_timestamp_seconds", "When the last round finished.",
                  MetricType::Gauge);
  Family round_duration("splitbrain_round_duration_seconds",
                        "Duration of the last round, confirmation included.", MetricType::Gauge);
  Family overruns("splitbrain_round_overruns_total",
                  "Rounds that started late because the previous one ran past the interval.",
                  MetricType::Counter);
  Family interval("splitbrain_cluster_probe_interval_seconds", "Configured probe interval.",
                  MetricType::Gauge);
  Family ttl("splitbrain_cluster_ttl_seconds", "Configured lease TTL.", MetricType::Gauge);
  Family confirmations("splitbrain_confirmations_total",
                       "Split-brain candidates re-probed, by result.", MetricType::Counter);
  for (const auto& c : clusters) {
    const std::string& name = c.spec.name;
    const Timing timing = c.timing();  // the lock store's ttl when the config gives none
    interval.Add({{"cluster", name}}, timing.probe_interval.count() / 1000.0);
    ttl.Add({{"cluster", name}}, timing.ttl.count() / 1000.0);
    members_total.Add({{"cluster", name}}, static_cast<double>(c.spec.members.size()));
    rounds.Add({{"cluster", name}}, static_cast<double>(c.rounds));
    overruns.Add({{"cluster", name}}, static_cast<double>(c.overruns));
    confirmations.Add({{"cluster", name}, {"result", "confirmed"}},
                      static_cast<double>(c.confirmations_accepted));
    confirmations.Add({{"cluster", name}, {"result", "rejected"}},
                      static_cast<double>(c.confirmations_rejected));
    if (!c.has_round) continue;
    for (Verdict v : AllVerdicts()) {
      verdict.Add({{"cluster", name}, {"verdict", VerdictName(v)}},
                  v == c.assessment.verdict ? 1 : 0);
    }
    verdict_since.Add({{"cluster", name}}, Seconds(c.verdict_since));
    for (const auto& [lineage, count] : c.assessment.writable_per_lineage) {
      writable_lineage.Add({{"cluster", name}, {"system_identifier", lineage}}, count);
    }
    round_ts.Add({{"cluster", name}}, Seconds(c.last_round_end));
    round_duration.Add({{"cluster", name}}, c.last_round_seconds);
  }
  return TakeAll({&verdict, &verdict_since, &writable_lineage, &members_total, &rounds, &round_ts,
                  &round_duration, &overruns, &interval, &ttl, &confirmations});
}

// Per member: what its last probe read, and when it last answered and was writable.
std::vector<MetricFamily> MemberReadingFamilies(const std::vector<ClusterSnapshot>& clusters) {
  Family up("splitbrain_member_up", "Whether the member answered the last probe.",
            MetricType::Gauge);
  Family writable("splitbrain_member_writable",
                  "Whether the member was writable at the last successful probe (absent "
                  "until one succeeds).",
                  MetricType::Gauge);
  Family timeline("splitbrain_member_timeline", "Timeline at the last successful probe.",
                  MetricType::Gauge);
  Family wal("splitbrain_member_wal_position_bytes",
             "Current (primary) or replayed (standby) WAL position at the last successful "
             "probe.",
             MetricType::Gauge);
  Family info("splitbrain_member_info", "Identity of the member at the last successful probe.",
              MetricType::Gauge);
  Family last_writable("splitbrain_member_last_seen_writable_timestamp_seconds",
                       "When the member was last seen writable.", MetricType::Gauge);
  Family last_ok("splitbrain_member_last_success_timestamp_seconds",
                 "When the member last answered a probe.", MetricType::Gauge);
  for (const auto& c : clusters) {
    for (const auto& member : c.spec.members) {
      const MemberHistory* history = ProbedHistory(c, member.name);
      if (history == nullptr) continue;
      const auto labels = MemberLabels(c.spec.name, member.name);
      up.Add(labels, history->last->ok() ? 1 : 0);
      if (history->last_seen_writable)
        last_writable.Add(labels, Seconds(*history->last_seen_writable));
      if (history->last_ok) last_ok.Add(labels, Seconds(*history->last_ok));
      // Writable, timeline and identity only from a reading of this round: a failed probe
      // leaves them absent rather than zero or stale.
      if (const PostgresReading* r = history->last->reading()) {
        writable.Add(labels, r->writable() ? 1 : 0);
        timeline.Add(labels, static_cast<double>(r->timeline));
        wal.Add(labels, static_cast<double>(r->wal_bytes));
        auto info_labels = labels;
        info_labels.push_back({"system_identifier", r->system_identifier});
        info_labels.push_back({"server_version", std::to_string(r->server_version)});
        info_labels.push_back({"address", RedactedUrl(member.address)});
        info.Add(info_labels, 1);
      } else if (const auto claim = history->last->claim()) {
        writable.Add(labels, claim->writable() ? 1 : 0);
      }
    }
  }
  return TakeAll({&up, &writable, &timeline, &wal, &info, &last_writable, &last_ok});
}

// During an incident only: WAL each holder wrote since the fork and how long two were
// writable. Unknown values are absent (/status says why), never zero.
std::vector<MetricFamily> WriteWindowFamilies(const std::vector<ClusterSnapshot>& clusters) {
  Family since_fork("splitbrain_incident_wal_bytes_since_fork",
                    "During a split brain: WAL the member wrote since its timeline parted from "
                    "the other's; for Redis, bytes of replication stream since the promotion "
                    "(absent when the fork point is unknown; see /status).",
                    MetricType::Gauge);
  Family double_write("splitbrain_incident_double_write_seconds",
                      "During a split brain: how long two members of the lineage were writable.",
                      MetricType::Gauge);
  for (const auto& c : clusters) {
    if (!c.write_window) continue;
    for (const auto& h : c.write_window->holders) {
      if (h.wal_bytes_since_fork) {
        since_fork.Add(MemberLabels(c.spec.name, h.member),
                       static_cast<double>(*h.wal_bytes_since_fork));
      }
    }
    if (c.write_window->double_write_seconds) {
      double_write.Add({{"cluster", c.spec.name}}, *c.write_window->double_write_seconds);
    }
  }
  return TakeAll({&since_fork, &double_write});
}

// Per member: how many probes ran, how long the last took, and why the failed ones failed.
std::vector<MetricFamily> ProbeCounterFamilies(const std::vector<ClusterSnapshot>& clusters) {
  Family duration("splitbrain_probe_duration_seconds", "Duration of the member's last probe.",
                  MetricType::Gauge);
  Family probes("splitbrain_probes_total", "Probes of the member.", MetricType::Counter);
  Family failures("splitbrain_probe_failures_total", "Failed probes of the member, by reason.",
                  MetricType::Counter);
  for (const auto& c : clusters) {
    for (const auto& member : c.spec.members) {
      const MemberCounters* counters = CountersOf(c, member.name);
      if (counters == nullptr) continue;
      const auto labels = MemberLabels(c.spec.name, member.name);
      probes.Add(labels, static_cast<double>(counters->probes));
      for (const auto& [reason, count] : counters->failures_by_reason) {
        auto with_reason = labels;
        with_reason.push_back({"reason", reason});
        failures.Add(with_reason, static_cast<double>(count));
      }
      if (counters->probes > 0) duration.Add(labels, counters->last_duration_seconds);
    }
  }
  return TakeAll({&duration, &probes, &failures});
}

// Fencing-aware severity (clusters with a lock store): the split brain the resource fences,
// the fence broken, and the tokens behind both.
struct FencingFamilies {
  Family fenced{"splitbrain_cluster_split_brain_fenced",
                "1 when a confirmed double holder's every zombie has a token below the "
                "resource's highest accepted (SplitBrainFenced, not paged).",
                MetricType::Gauge};
  Family regressed{"splitbrain_fencing_token_regressed",
                   "1 while a fencing token went backwards: the resource accepted a lower token "
                   "after a higher one, or the lock store's revision went back "
                   "(FencingTokenRegressed).",
                   MetricType::Gauge};
  Family store_revision{"splitbrain_lock_store_revision",
                        "The lock store's own revision at the last successful read (etcd).",
                        MetricType::Gauge};
  Family resource_token{"splitbrain_resource_fencing_token",
                        "The highest token the lock's resource witness says it accepted.",
                        MetricType::Gauge};
};

void AddFencing(const ClusterSnapshot& c, FencingFamilies& fencing) {
  const std::string& name = c.spec.name;
  const Assessment& a = c.assessment;
  if (c.has_round) {
    fencing.fenced.Add({{"cluster", name}}, a.split_brain_fenced ? 1 : 0);
    fencing.regressed.Add({{"cluster", name}}, a.fencing_regressions.empty() ? 0 : 1);
  }
  if (c.last_good_dcs && c.last_good_dcs->store_revision > 0) {
    fencing.store_revision.Add({{"cluster", name}},
                               static_cast<double>(c.last_good_dcs->store_revision));
  }
  if (a.resource_token) {
    fencing.resource_token.Add({{"cluster", name}}, static_cast<double>(*a.resource_token));
  }
}

// Per cluster: its kind, and what its lock store said (clusters with one).
std::vector<MetricFamily> LockStoreFamilies(const std::vector<ClusterSnapshot>& clusters) {
  FencingFamilies fencing;
  Family cluster_info("splitbrain_cluster_info", "The cluster's kind and Patroni scope.",
                      MetricType::Gauge);
  Family lock_up("splitbrain_lock_store_up",
                 "Whether the lock store answered in the last round (Patroni clusters).",
                 MetricType::Gauge);
  Family lock_failures("splitbrain_lock_store_failures_total", "Failed reads of the lock store.",
                       MetricType::Counter);
  Family lock_success("splitbrain_lock_store_last_success_timestamp_seconds",
                      "When the lock store last answered.", MetricType::Gauge);
  Family lock_holder("splitbrain_lock_holder_info",
                     "The member named by the leader key at the last successful read.",
                     MetricType::Gauge);
  Family lease_left("splitbrain_lock_lease_remaining_seconds",
                    "Seconds left on the leader key's lease at the last successful read.",
                    MetricType::Gauge);
  Family lock_revision("splitbrain_lock_mod_revision",
                       "mod_revision of the leader key at the last successful read.",
                       MetricType::Gauge);
  Family lock_dissent("splitbrain_lock_store_dissent",
                      "Keepers of the record (Sentinels) that named another holder or did not "
                      "answer, at the last successful read; 0 for single-keeper stores.",
                      MetricType::Gauge);
  for (const auto& c : clusters) {
    const std::string& name = c.spec.name;
    cluster_info.Add({{"cluster", name}, {"kind", c.lock.kind}, {"scope", c.spec.scope}}, 1);
    if (!c.lock.has_store) continue;
    AddFencing(c, fencing);
    lock_failures.Add({{"cluster", name}}, static_cast<double>(c.dcs_failures));
    if (c.last_dcs) lock_up.Add({{"cluster", name}}, c.dcs_consecutive_failures == 0 ? 1 : 0);
    if (c.last_good_dcs) {
      lock_success.Add({{"cluster", name}}, Seconds(c.last_dcs_success));
      lock_holder.Add({{"cluster", name}, {"holder", c.last_good_dcs->holder}}, 1);
      lease_left.Add({{"cluster", name}},
                     static_cast<double>(c.last_good_dcs->lease_ttl_remaining));
      lock_revision.Add({{"cluster", name}}, static_cast<double>(c.last_good_dcs->mod_revision));
      lock_dissent.Add({{"cluster", name}}, static_cast<double>(c.last_good_dcs->dissent.size()));
    }
  }
  return TakeAll({&cluster_info, &lock_up, &lock_failures, &lock_success, &lock_holder, &lease_left,
                  &lock_revision, &lock_dissent, &fencing.fenced, &fencing.regressed,
                  &fencing.store_revision, &fencing.resource_token});
}

// Per cluster whose lock store offers a watch: whether it is established, its breaks, the
// holder changes it reported, and the rounds they started early.
std::vector<MetricFamily> WatchFamilies(const std::vector<ClusterSnapshot>& clusters) {
  Family watch_up("splitbrain_lock_watch_up",
                  "Whether the lock store's watch on the lock record is established.",
                  MetricType::Gauge);
  Family watch_breaks("splitbrain_lock_watch_breaks_total",
                      "Established lock-store watches that broke and were re-established.",
                      MetricType::Counter);
  Family watch_changes("splitbrain_lock_watch_changes_total",
                       "Holder changes the lock store's watch reported.", MetricType::Counter);
  Family early_rounds("splitbrain_follow_up_rounds_total",
                      "Rounds run early, after a lock-store watch reported a holder change.",
                      MetricType::Counter);
  for (const auto& c : clusters) {
    if (!c.watch) continue;
    const std::vector<ClientMetric::Label> cluster = {{"cluster", c.spec.name}};
    watch_up.Add(cluster, c.watch->up ? 1 : 0);
    watch_breaks.Add(cluster, static_cast<double>(c.watch->breaks));
    watch_changes.Add(cluster, static_cast<double>(c.watch->changes));
    early_rounds.Add(cluster, static_cast<double>(c.follow_up_rounds));
  }
  return TakeAll({&watch_up, &watch_breaks, &watch_changes, &early_rounds});
}

// Per member: its standing with the lock (clusters with a lock store), and what its manager
// (Patroni's REST API) said.
std::vector<MetricFamily> MemberLockFamilies(const std::vector<ClusterSnapshot>& clusters) {
  Family holds_lock("splitbrain_member_holds_lock",
                    "Whether the leader key names this member (absent while unreadable).",
                    MetricType::Gauge);
  Family claims_lock("splitbrain_member_claims_lock",
                     "Whether the member's own last answer claims the lock (a writable "
                     "PostgreSQL, a Redis master, a lease claimant), fenced or not.",
                     MetricType::Gauge);
  Family zombie("splitbrain_member_zombie",
                "1 when the member is writable but does not hold the lock.", MetricType::Gauge);
  Family patroni_up("splitbrain_member_patroni_up",
                    "Whether the member's Patroni REST API answered in the last round.",
                    MetricType::Gauge);
  Family patroni_failures("splitbrain_patroni_failures_total",
                          "Failed reads of the member's Patroni REST API, by reason.",
                          MetricType::Counter);
  Family dcs_last_seen("splitbrain_member_dcs_last_seen_timestamp_seconds",
                       "The member's own dcs_last_seen, as its Patroni last reported it.",
                       MetricType::Gauge);
  for (const auto& c : clusters) {
    const Assessment& a = c.assessment;
    for (const auto& member : c.spec.members) {
      const auto labels = MemberLabels(c.spec.name, member.name);
      if (const MemberCounters* counters = CountersOf(c, member.name)) {
        for (const auto& [reason, count] : counters->rest_failures_by_reason) {
          auto with_reason = labels;
          with_reason.push_back({"reason", reason});
          patroni_failures.Add(with_reason, static_cast<double>(count));
        }
      }
      const MemberHistory* history = ProbedHistory(c, member.name);
      if (history == nullptr) continue;
      if (history->last->patroni) {
        patroni_up.Add(labels, std::holds_alternative<PatroniReading>(*history->last->patroni));
      }
      if (history->last_patroni && history->last_patroni->dcs_last_seen) {
        dcs_last_seen.Add(labels, *history->last_patroni->dcs_last_seen);
      }
      if (const std::optional<Claim> claim = history->last->claim()) {
        claims_lock.Add(labels, claim->holds ? 1 : 0);
      }
      if (!c.lock.has_store || !c.has_round) continue;
      if (a.lock_readable) holds_lock.Add(labels, a.lock_holder == member.name ? 1 : 0);
      const bool is_zombie =
          std::find(a.zombies.begin(), a.zombies.end(), member.name) != a.zombies.end();
      zombie.Add(labels, is_zombie ? 1 : 0);
    }
  }
  return TakeAll(
      {&holds_lock, &claims_lock, &zombie, &patroni_up, &patroni_failures, &dcs_last_seen});
}

// Per Alertmanager: how pushing alerts to it goes.
std::vector<MetricFamily> PushFamilies(const std::vector<AlertmanagerStats>& push_stats) {
  Family pushes("splitbrain_alertmanager_pushes_total",
                "POSTs of alerts to the Alertmanager (retries included in one push).",
                MetricType::Counter);
  Family push_failures("splitbrain_alertmanager_push_failures_total",
                       "Pushes that failed after every attempt.", MetricType::Counter);
  Family alerts_sent("splitbrain_alertmanager_alerts_sent_total",
                     "Alerts delivered to the Alertmanager.", MetricType::Counter);
  Family alerts_dropped("splitbrain_alertmanager_alerts_dropped_total",
                        "Alert states dropped because the queue to a slow Alertmanager was full.",
                        MetricType::Counter);
  Family push_success("splitbrain_alertmanager_last_success_timestamp_seconds",
                      "When a push to the Alertmanager last succeeded.", MetricType::Gauge);
  for (const auto& am : push_stats) {
    pushes.Add({{"alertmanager", am.url}}, static_cast<double>(am.pushes));
    push_failures.Add({{"alertmanager", am.url}}, static_cast<double>(am.failures));
    alerts_sent.Add({{"alertmanager", am.url}}, static_cast<double>(am.alerts_sent));
    alerts_dropped.Add({{"alertmanager", am.url}}, static_cast<double>(am.dropped));
    push_success.Add({{"alertmanager", am.url}}, am.last_success_unix);
  }
  return TakeAll({&pushes, &push_failures, &alerts_sent, &alerts_dropped, &push_success});
}

// Per cluster with a round: whether a split-brain incident is open.
MetricFamily SplitBrainIncidentFamily(const std::vector<ClusterSnapshot>& clusters) {
  Family incident("splitbrain_cluster_split_brain_incident",
                  "1 from a confirmed split brain until a round reads every member and finds at "
                  "most one writable.",
                  MetricType::Gauge);
  for (const auto& c : clusters) {
    if (c.has_round) incident.Add({{"cluster", c.spec.name}}, c.split_brain_open ? 1 : 0);
  }
  return incident.Take();
}

// The "with" label of a lineage fork: the other owners named (at most kMaxForkPartners),
// then how many more.
std::string ForkPartners(const LineageFork& fork) {
  std::string out;
  for (const auto& unit : fork.with) out += (out.empty() ? "" : ",") + unit;
  if (fork.with_total > fork.with.size()) {
    out += ",+" + std::to_string(fork.with_total - fork.with.size());
  }
  return out;
}

// Per cluster: what the suppressors kept from paging, and lineages writable elsewhere too.
std::vector<MetricFamily> SuppressionFamilies(const std::vector<ClusterSnapshot>& clusters) {
  Family suppression_expiry(
      "splitbrain_suppression_expiry_timestamp_seconds",
      "A suppression applied in the cluster's latest round, valued at when it lapses: "
      "hidden_verdict is what it kept from firing.",
      MetricType::Gauge);
  Family suppressed_split_brain(
      "splitbrain_suppressed_split_brain",
      "1 while a confirmed same-lineage split brain is inside a declared scope: it warns "
      "(SplitBrainSuppressed) instead of paging.",
      MetricType::Gauge);
  Family transitions("splitbrain_transitions_total",
                     "Candidates that failed confirmation because a switchover or failover "
                     "was seen (old primary demoted, restarted or shutting down).",
                     MetricType::Counter);
  Family lineage_forked(
      "splitbrain_cluster_lineage_forked",
      "The cluster's lineage is writable in another cluster or scope too (with): 1, or 0 "
      "while a cutover declaration covers it.",
      MetricType::Gauge);
  for (const auto& c : clusters) {
    const std::string& name = c.spec.name;
    transitions.Add({{"cluster", name}}, static_cast<double>(c.transitions));
    for (const auto& s : c.assessment.suppressions) {
      suppression_expiry.Add({{"cluster", name},
                              {"suppressor", s.suppressor},
                              {"kind", s.kind},
                              {"reason", s.reason},
                              {"hidden_verdict", s.hidden},
                              {"declaration", s.declaration_id}},
                             Seconds(s.expires));
      if (c.assessment.suppressed_split_brain && s.hidden == VerdictName(Verdict::kSplitBrain) &&
          !s.declaration_id.empty()) {
        suppressed_split_brain.Add(
            {{"cluster", name}, {"suppressor", s.suppressor}, {"reason", s.reason}}, 1);
      }
    }
    for (const auto& f : c.forks) {
      lineage_forked.Add({{"cluster", name}, {"lineage", f.lineage}, {"with", ForkPartners(f)}},
                         f.declared_by ? 0 : 1);
      if (!f.declared_by) continue;
      suppression_expiry.Add({{"cluster", name},
                              {"suppressor", "provisioning"},
                              {"kind", DeclarationKindName(f.declared_by->kind)},
                              {"reason", f.declared_by->reason},
                              {"hidden_verdict", "lineage_forked"},
                              {"declaration", f.declared_by->id}},
                             Seconds(f.declared_by->expires));
    }
  }
  return TakeAll({&suppression_expiry, &suppressed_split_brain, &transitions, &lineage_forked});
}

// The declarations in force and the drop-in files rejected; without a source, no series.
std::vector<MetricFamily> DeclarationFamilies(const std::optional<DeclarationsView>& view) {
  Family declaration_expiry(
      "splitbrain_declaration_expiry_timestamp_seconds",
      "Every declaration in force (config, drop-in file or API), valued at its expiry.",
      MetricType::Gauge);
  Family declaration_errors("splitbrain_declaration_file_errors",
                            "Drop-in declaration files (and the API state file) rejected now; "
                            "see /status for file, line and column.",
                            MetricType::Gauge);
  Family declarations_in_force("splitbrain_declarations",
                               "Declarations in force now, by where they come from (config, "
                               "file, api, alertmanager).",
                               MetricType::Gauge);
  if (view) {
    const auto now = WallClock::now();
    for (const auto& d : view->all) {
      if (!d.ActiveAt(now)) continue;
      declaration_expiry.Add({{"id", d.id},
                              {"kind", DeclarationKindName(d.kind)},
                              {"cluster", d.cluster},
                              {"scope", d.scope},
                              {"member", d.member},
                              {"source", d.source}},
                             Seconds(d.expires));
    }
    std::set<std::string> bad_files;
    for (const auto& e : view->errors) bad_files.insert(e.file);
    declaration_errors.Add({}, static_cast<double>(bad_files.size()));
    std::map<std::string, double> by_source = {
        {"config", 0}, {"file", 0}, {"api", 0}, {"alertmanager", 0}};
    for (const auto& d : view->all) by_source[d.source] += d.ActiveAt(now) ? 1 : 0;
    for (const auto& [source, count] : by_source)
      declarations_in_force.Add({{"source", source}}, count);
  }
  return TakeAll({&declaration_expiry, &declaration_errors, &declarations_in_force});
}

// What reading the Alertmanagers' silences says; series only when silences are read.
std::vector<MetricFamily> SilenceFamilies(const std::optional<DeclarationsView>& view) {
  Family silences_up("splitbrain_alertmanager_silences_up",
                     "1 when the last read of this Alertmanager's silences succeeded; "
                     "declarations last read from it stay until their own expiry.",
                     MetricType::Gauge);
  Family silences_success("splitbrain_alertmanager_silences_last_success_timestamp_seconds",
                          "When this Alertmanager's silences were last read.", MetricType::Gauge);
  Family silence_errors("splitbrain_declaration_silence_errors",
                        "Silences with a splitbrain_declaration matcher rejected now; see "
                        "/status for each one and why.",
                        MetricType::Gauge);
  Family page_silences("splitbrain_alertmanager_page_silences",
                       "Active silences in Alertmanager that match the SplitBrain page.",
                       MetricType::Gauge);
  if (view) {
    for (const auto& s : view->silence_sources) {
      silences_up.Add({{"alertmanager", s.alertmanager}}, s.up ? 1 : 0);
      if (s.last_success_unix > 0) {
        silences_success.Add({{"alertmanager", s.alertmanager}}, s.last_success_unix);
      }
    }
    if (!view->silence_sources.empty()) {
      silence_errors.Add({}, static_cast<double>(view->silence_errors.size()));
      page_silences.Add({}, static_cast<double>(view->page_silences.size()));
    }
  }
  return TakeAll({&silences_up, &silences_success, &silence_errors, &page_silences});
}

}  // namespace

DetectorCollector::DetectorCollector(SnapshotSource source, const ConfigReloadStatus* reload_status,
                                     PushStatsSource push_stats, DeclarationsSource declarations)
    : source_(std::move(source)),
      reload_status_(reload_status),
      push_stats_(std::move(push_stats)),
      declarations_(std::move(declarations)) {}

std::vector<MetricFamily> DetectorCollector::Collect() const {
  const std::vector<ClusterSnapshot> clusters = source_();
  std::optional<DeclarationsView> declarations;
  if (declarations_) declarations = declarations_();
  std::vector<AlertmanagerStats> push_stats;
  if (push_stats_) push_stats = push_stats_();

  // The order of families is the order of the /metrics page; keep it stable.
  std::vector<MetricFamily> out = BuildAndReloadFamilies(reload_status_);
  Append(out, ClusterRoundFamilies(clusters));
  Append(out, MemberReadingFamilies(clusters));
  Append(out, ProbeCounterFamilies(clusters));
  Append(out, LockStoreFamilies(clusters));
  Append(out, WatchFamilies(clusters));
  Append(out, MemberLockFamilies(clusters));
  Append(out, PushFamilies(push_stats));
  out.push_back(SplitBrainIncidentFamily(clusters));
  Append(out, WriteWindowFamilies(clusters));
  Append(out, SuppressionFamilies(clusters));
  Append(out, DeclarationFamilies(declarations));
  Append(out, SilenceFamilies(declarations));
  Append(out, RuntimeHealthFamilies(clusters));
  Append(out, RemediationFamilies(clusters));
  return out;
}

std::string RenderMetrics(const prometheus::Collectable& collectable) {
  return prometheus::TextSerializer().Serialize(collectable.Collect());
}

}  // namespace sbd
