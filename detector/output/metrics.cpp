#include "detector/output/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "detector/common/build_info.h"
#include "detector/common/internal_errors.h"

namespace sbd {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

double Seconds(WallClock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

/// One metric family under construction.
class Family {
 public:
  Family(std::string name, std::string help, MetricType type) {
    family_.name = std::move(name);
    family_.help = std::move(help);
    family_.type = type;
  }
  void Add(std::vector<ClientMetric::Label> labels, double value) {
    // A repeated label set would make the whole scrape fail; the first one stands.
    std::string key;
    for (const auto& l : labels) key += l.name + '\0' + l.value + '\0';
    if (!seen_.insert(key).second) return;
    ClientMetric metric;
    metric.label = std::move(labels);
    if (family_.type == MetricType::Counter) {
      metric.counter.value = value;
    } else {
      metric.gauge.value = value;
    }
    family_.metric.push_back(std::move(metric));
  }
  MetricFamily Take() { return std::move(family_); }

 private:
  MetricFamily family_;
  std::set<std::string> seen_;
};

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

}  // namespace

DetectorCollector::DetectorCollector(SnapshotSource source, const ConfigReloadStatus* reload_status,
                                     PushStatsSource push_stats, DeclarationsSource declarations)
    : source_(std::move(source)),
      reload_status_(reload_status),
      push_stats_(std::move(push_stats)),
      declarations_(std::move(declarations)) {}

std::vector<MetricFamily> DetectorCollector::Collect() const {
  const std::vector<ClusterSnapshot> clusters = source_();
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
  if (reload_status_ != nullptr) {
    reload_ok.Add({}, reload_status_->last_successful.load() ? 1 : 0);
    reload_ts.Add({}, reload_status_->last_success_timestamp.load());
  }

  Family verdict("splitbrain_cluster_verdict",
                 "1 for the cluster's current verdict, 0 for the others.", MetricType::Gauge);
  Family incident("splitbrain_cluster_split_brain_incident",
                  "1 from a confirmed split brain until a round reads every member and finds at "
                  "most one writable.",
                  MetricType::Gauge);
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
  Family duration("splitbrain_probe_duration_seconds", "Duration of the member's last probe.",
                  MetricType::Gauge);
  Family probes("splitbrain_probes_total", "Probes of the member.", MetricType::Counter);
  Family failures("splitbrain_probe_failures_total", "Failed probes of the member, by reason.",
                  MetricType::Counter);
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
  Family holds_lock("splitbrain_member_holds_lock",
                    "Whether the leader key names this member (absent while unreadable).",
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
    interval.Add({{"cluster", name}}, c.spec.probe_interval.count() / 1000.0);
    ttl.Add({{"cluster", name}}, c.spec.ttl.count() / 1000.0);
    members_total.Add({{"cluster", name}}, static_cast<double>(c.spec.members.size()));
    rounds.Add({{"cluster", name}}, static_cast<double>(c.rounds));
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
      std::string with;
      // Bounded: one label value, not a list of every cluster of a shared lineage.
      constexpr size_t kMaxWith = 5;
      for (size_t i = 0; i < f.with.size() && i < kMaxWith; ++i) {
        with += (with.empty() ? "" : ",") + f.with[i];
      }
      if (f.with.size() > kMaxWith) with += ",+" + std::to_string(f.with.size() - kMaxWith);
      lineage_forked.Add({{"cluster", name}, {"lineage", f.lineage}, {"with", with}},
                         f.declared_by ? 0 : 1);
      if (f.declared_by) {
        suppression_expiry.Add({{"cluster", name},
                                {"suppressor", "provisioning"},
                                {"kind", DeclarationKindName(f.declared_by->kind)},
                                {"reason", f.declared_by->reason},
                                {"hidden_verdict", "lineage_forked"},
                                {"declaration", f.declared_by->id}},
                               Seconds(f.declared_by->expires));
      }
    }
    overruns.Add({{"cluster", name}}, static_cast<double>(c.overruns));
    const bool patroni = c.spec.kind == ClusterKind::kPatroni;
    cluster_info.Add(
        {{"cluster", name}, {"kind", patroni ? "patroni" : "postgres"}, {"scope", c.spec.scope}},
        1);
    if (patroni) {
      lock_failures.Add({{"cluster", name}}, static_cast<double>(c.dcs_failures));
      if (c.last_dcs) lock_up.Add({{"cluster", name}}, c.dcs_consecutive_failures == 0 ? 1 : 0);
      if (c.last_good_dcs) {
        lock_success.Add({{"cluster", name}}, Seconds(c.last_dcs_success));
        lock_holder.Add({{"cluster", name}, {"holder", c.last_good_dcs->holder}}, 1);
        lease_left.Add({{"cluster", name}},
                       static_cast<double>(c.last_good_dcs->lease_ttl_remaining));
        lock_revision.Add({{"cluster", name}}, static_cast<double>(c.last_good_dcs->mod_revision));
      }
    }
    confirmations.Add({{"cluster", name}, {"result", "confirmed"}},
                      static_cast<double>(c.confirmations_accepted));
    confirmations.Add({{"cluster", name}, {"result", "rejected"}},
                      static_cast<double>(c.confirmations_rejected));
    if (c.has_round) {
      for (Verdict v : AllVerdicts()) {
        verdict.Add({{"cluster", name}, {"verdict", VerdictName(v)}},
                    v == c.assessment.verdict ? 1 : 0);
      }
      verdict_since.Add({{"cluster", name}}, Seconds(c.verdict_since));
      incident.Add({{"cluster", name}}, c.split_brain_open ? 1 : 0);
      for (const auto& [lineage, count] : c.assessment.writable_per_lineage) {
        writable_lineage.Add({{"cluster", name}, {"system_identifier", lineage}}, count);
      }
      round_ts.Add({{"cluster", name}}, Seconds(c.last_round_end));
      round_duration.Add({{"cluster", name}}, c.last_round_seconds);
    }
    for (const auto& member : c.spec.members) {
      std::vector<ClientMetric::Label> labels = {{"cluster", name}, {"member", member.name}};
      const auto counters = c.counters.find(member.name);
      if (counters != c.counters.end()) {
        probes.Add(labels, static_cast<double>(counters->second.probes));
        for (const auto& [reason, count] : counters->second.failures_by_reason) {
          auto with_reason = labels;
          with_reason.push_back({"reason", reason});
          failures.Add(with_reason, static_cast<double>(count));
        }
        for (const auto& [reason, count] : counters->second.rest_failures_by_reason) {
          auto with_reason = labels;
          with_reason.push_back({"reason", reason});
          patroni_failures.Add(with_reason, static_cast<double>(count));
        }
        if (counters->second.probes > 0)
          duration.Add(labels, counters->second.last_duration_seconds);
      }
      auto h = c.history.members.find(member.name);
      if (h == c.history.members.end() || !h->second.last) continue;
      const MemberHistory& history = h->second;
      up.Add(labels, history.last->ok() ? 1 : 0);
      if (history.last->patroni) {
        patroni_up.Add(labels, std::holds_alternative<PatroniReading>(*history.last->patroni));
      }
      if (history.last_patroni && history.last_patroni->dcs_last_seen) {
        dcs_last_seen.Add(labels, *history.last_patroni->dcs_last_seen);
      }
      if (patroni && c.has_round && c.assessment.lock_readable) {
        holds_lock.Add(labels, c.assessment.lock_holder == member.name ? 1 : 0);
      }
      if (patroni && c.has_round) {
        const auto& z = c.assessment.zombies;
        zombie.Add(labels, std::find(z.begin(), z.end(), member.name) != z.end() ? 1 : 0);
      }
      if (history.last_seen_writable)
        last_writable.Add(labels, Seconds(*history.last_seen_writable));
      if (history.last_ok) last_ok.Add(labels, Seconds(*history.last_ok));
      // Writable, timeline and identity only from a reading of this round: a failed probe
      // leaves them absent rather than zero or stale.
      if (const PostgresReading* r = history.last->reading()) {
        writable.Add(labels, r->writable() ? 1 : 0);
        timeline.Add(labels, static_cast<double>(r->timeline));
        wal.Add(labels, static_cast<double>(r->wal_bytes));
        auto info_labels = labels;
        info_labels.push_back({"system_identifier", r->system_identifier});
        info_labels.push_back({"server_version", std::to_string(r->server_version)});
        info_labels.push_back({"address", member.address});
        info.Add(info_labels, 1);
      }
    }
  }

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
  if (declarations_) {
    const DeclarationsView view = declarations_();
    const auto now = WallClock::now();
    for (const auto& d : view.all) {
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
    for (const auto& e : view.errors) bad_files.insert(e.file);
    declaration_errors.Add({}, static_cast<double>(bad_files.size()));
    std::map<std::string, double> by_source = {
        {"config", 0}, {"file", 0}, {"api", 0}, {"alertmanager", 0}};
    for (const auto& d : view.all) by_source[d.source] += d.ActiveAt(now) ? 1 : 0;
    for (const auto& [source, count] : by_source)
      declarations_in_force.Add({{"source", source}}, count);
    for (const auto& s : view.silence_sources) {
      silences_up.Add({{"alertmanager", s.alertmanager}}, s.up ? 1 : 0);
      if (s.last_success_unix > 0) {
        silences_success.Add({{"alertmanager", s.alertmanager}}, s.last_success_unix);
      }
    }
    if (!view.silence_sources.empty()) {
      silence_errors.Add({}, static_cast<double>(view.silence_errors.size()));
      page_silences.Add({}, static_cast<double>(view.page_silences.size()));
    }
  }

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
  if (push_stats_) {
    for (const auto& am : push_stats_()) {
      pushes.Add({{"alertmanager", am.url}}, static_cast<double>(am.pushes));
      push_failures.Add({{"alertmanager", am.url}}, static_cast<double>(am.failures));
      alerts_sent.Add({{"alertmanager", am.url}}, static_cast<double>(am.alerts_sent));
      alerts_dropped.Add({{"alertmanager", am.url}}, static_cast<double>(am.dropped));
      push_success.Add({{"alertmanager", am.url}}, am.last_success_unix);
    }
  }

  std::vector<MetricFamily> out;
  for (Family* f : {&build,
                    &reload_ok,
                    &reload_ts,
                    &verdict,
                    &verdict_since,
                    &writable_lineage,
                    &members_total,
                    &rounds,
                    &round_ts,
                    &round_duration,
                    &overruns,
                    &interval,
                    &ttl,
                    &confirmations,
                    &up,
                    &writable,
                    &timeline,
                    &wal,
                    &info,
                    &last_writable,
                    &last_ok,
                    &duration,
                    &probes,
                    &failures,
                    &cluster_info,
                    &lock_up,
                    &lock_failures,
                    &lock_success,
                    &lock_holder,
                    &lease_left,
                    &lock_revision,
                    &holds_lock,
                    &zombie,
                    &patroni_up,
                    &patroni_failures,
                    &dcs_last_seen,
                    &pushes,
                    &push_failures,
                    &alerts_sent,
                    &alerts_dropped,
                    &push_success,
                    &incident,
                    &suppression_expiry,
                    &suppressed_split_brain,
                    &transitions,
                    &lineage_forked,
                    &declaration_expiry,
                    &declaration_errors,
                    &declarations_in_force,
                    &silences_up,
                    &silences_success,
                    &silence_errors,
                    &page_silences}) {
    out.push_back(f->Take());
  }
  for (auto& f : RuntimeHealthFamilies(clusters)) out.push_back(std::move(f));
  return out;
}

std::string RenderMetrics(const prometheus::Collectable& collectable) {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(collectable.Collect());
}

}  // namespace sbd
