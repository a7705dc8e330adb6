#include "detector/output/status.h"

#include <algorithm>
#include <ctime>
#include <iomanip>
#include <sstream>

#include "detector/common/json_text.h"
#include "detector/common/logfmt.h"
#include "detector/common/network_text.h"
#include "detector/output/remediation_output.h"
#include "detector/output/witness_views.h"
#include "detector/verdicts/witnesses.h"

namespace sbd {
namespace {

std::string MemberState(const MemberHistory* h) {
  if (h == nullptr || !h->last) return "not probed";
  if (const PostgresReading* r = h->last->reading()) {
    if (r->writable()) return "writable";
    return r->in_recovery ? "replica" : "read-only";
  }
  if (const auto claim = h->last->claim()) {
    return claim->writable() ? "writable" : claim->holds ? "fenced" : "replica";
  }
  return std::string("unknown (") + ReasonName(h->last->failure()->reason) + ")";
}

bool Contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

}  // namespace

std::string FormatTime(WallClock::time_point t) {
  auto secs = WallClock::to_time_t(t);
  auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::ostringstream out;
  out << std::put_time(&tm, "%Y-%m-%dT%H:%M:%S") << '.' << std::setw(3) << std::setfill('0')
      << millis << 'Z';
  return out.str();
}

nlohmann::json DeclarationJson(const Declaration& d, WallClock::time_point now) {
  return {{"id", d.id},
          {"kind", DeclarationKindName(d.kind)},
          {"cluster", d.cluster},
          {"scope", d.scope},
          {"member", d.member},
          {"reason", d.reason},
          {"author", d.author},
          {"source", d.source},
          {"origin", d.origin},
          {"created", FormatRfc3339(d.created)},
          {"expires", FormatRfc3339(d.expires)},
          {"active", d.ActiveAt(now)}};
}

namespace {

// What the Alertmanager silences say: each Alertmanager read, the declaration silences
// rejected, and the silences that hide the page.
void AddSilences(const DeclarationsView& view, nlohmann::json& out) {
  if (view.silence_sources.empty()) return;
  out["silence_sources"] = nlohmann::json::array();
  for (const auto& s : view.silence_sources) {
    nlohmann::json source = {{"alertmanager", s.alertmanager}, {"up", s.up}};
    if (s.last_success_unix > 0) {
      source["last_success"] =
          FormatRfc3339(WallClock::time_point(std::chrono::duration_cast<WallClock::duration>(
              std::chrono::duration<double>(s.last_success_unix))));
    }
    if (!s.error.empty()) source["error"] = s.error;
    out["silence_sources"].push_back(std::move(source));
  }
  out["silence_errors"] = nlohmann::json::array();
  for (const auto& f : view.silence_errors) out["silence_errors"].push_back(f.ToString());
  out["page_silences"] = nlohmann::json::array();
  for (const auto& f : view.page_silences) out["page_silences"].push_back(f.ToString());
}

void SilencesText(const nlohmann::json& status, std::ostream& out) {
  if (!status.contains("silence_sources")) return;
  out << "Alertmanager silences:\n";
  for (const auto& s : status["silence_sources"]) {
    out << "  " << s["alertmanager"].get<std::string>() << ": "
        << (s["up"].get<bool>() ? "read" : "UNREADABLE: " + s.value("error", std::string()))
        << (s.contains("last_success") ? "; last read " + s["last_success"].get<std::string>()
                                       : std::string("; never read"))
        << "\n";
  }
  if (!status["silence_errors"].empty()) {
    out << "Rejected declaration silences:\n";
    for (const auto& e : status["silence_errors"]) out << "  " << e.get<std::string>() << "\n";
  }
  if (!status["page_silences"].empty()) {
    out << "WARNING: the SplitBrain page is being silenced in Alertmanager; a real split brain "
           "would page nobody:\n";
    for (const auto& e : status["page_silences"]) out << "  " << e.get<std::string>() << "\n";
  }
}

}  // namespace
namespace {

// The top-level declaration sections: every declaration, every rejected file, the silences.
void AddDeclarations(const DeclarationsView& declarations, WallClock::time_point now,
                     nlohmann::json& out) {
  out["declarations"] = nlohmann::json::array();
  for (const auto& d : declarations.all) out["declarations"].push_back(DeclarationJson(d, now));
  out["declaration_errors"] = nlohmann::json::array();
  for (const auto& e : declarations.errors) out["declaration_errors"].push_back(e.ToString());
  AddSilences(declarations, out);
}

nlohmann::json SuppressionsJson(const std::vector<Suppression>& suppressions) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : suppressions) {
    out.push_back({{"suppressor", s.suppressor},
                   {"kind", s.kind},
                   {"reason", s.reason},
                   {"declaration", s.declaration_id},
                   {"hidden_verdict", s.hidden},
                   {"members", s.members},
                   {"expires", FormatRfc3339(s.expires)}});
  }
  return out;
}

nlohmann::json LineageForksJson(const std::vector<LineageFork>& forks) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : forks) {
    nlohmann::json fork = {{"lineage", f.lineage},
                           {"with", f.with},
                           {"with_total", f.with_total},
                           {"members", f.members}};
    if (f.declared_by) {
      fork["declared_by"] = f.declared_by->id;
      fork["reason"] = f.declared_by->reason;
      fork["expires"] = FormatRfc3339(f.declared_by->expires);
    }
    out.push_back(fork);
  }
  return out;
}

// A cluster with a lock store: what the store said this round, and what its last successful
// read held.
nlohmann::json LockJson(const ClusterSnapshot& c) {
  const Assessment& a = c.assessment;
  nlohmann::json lock = {{"scope", c.spec.scope}, {"readable", a.lock_readable}};
  lock["kind"] = c.lock.kind;
  lock["record"] = c.lock.record;
  if (!a.lock_readable) lock["error"] = a.lock_error;
  if (c.last_good_dcs) {
    lock["holder"] = c.last_good_dcs->holder;
    lock["mod_revision"] = c.last_good_dcs->mod_revision;
    lock["lease_ttl_remaining_seconds"] = c.last_good_dcs->lease_ttl_remaining;
    lock["lease_granted_ttl_seconds"] = c.last_good_dcs->lease_granted_ttl;
    lock["initialize"] = c.last_good_dcs->initialize;
    lock["endpoint"] = RedactedUrl(c.last_good_dcs->endpoint);
    // Keys the lock store holds that could not be read (e.g. a hostile members/* value).
    lock["rejected_keys"] = c.last_good_dcs->rejected;
    if (!c.last_good_dcs->dissent.empty()) lock["dissent"] = c.last_good_dcs->dissent;
    // Candidates queued behind the holder (an etcd election or lock), in order.
    if (!c.last_good_dcs->waiting.empty()) lock["waiting"] = c.last_good_dcs->waiting;
    if (!c.last_good_dcs->holder_token.empty()) {
      lock["holder_token"] = ShownToken(c.last_good_dcs->holder_token);
    }
    lock["last_success"] = FormatTime(c.last_dcs_success);
  }
  return lock;
}

// The member's last probe, its latest successful reading and its writable streak.
void AddProbeFields(const MemberHistory& h, const std::string& lineage, nlohmann::json& member) {
  if (h.last) {
    member["probe_seconds"] = h.last->window.Seconds();
    member["probed_at"] = FormatTime(h.last->window.sent_wall);
    if (const ProbeFailure* f = h.last->failure()) {
      member["error"] = {{"reason", ReasonName(f->reason)}, {"message", f->message}};
    }
  }
  // Identity comes from the latest successful reading, marked with when it was taken.
  if (h.last_reading) {
    const PostgresReading& r = *h.last_reading;
    member["system_identifier"] = r.system_identifier;
    member["in_lineage"] = r.system_identifier == lineage;
    member["timeline"] = r.timeline;
    member["wal_lsn"] = r.wal_lsn;
    member["server_version"] = r.server_version;
    member["postmaster_start"] = r.postmaster_start;
    member["last_success"] = FormatTime(*h.last_ok);
  } else if (h.last_claim) {
    // Another kind: its lineage, and the one it continued from.
    const Claim& c = *h.last_claim;
    member["lineage"] = c.lineage;
    member["in_lineage"] = c.lineage == lineage;
    if (!c.previous_lineage.empty()) {
      member["previous_lineage"] = c.previous_lineage;
      member["previous_lineage_offset"] = c.previous_lineage_offset;
    }
    member["fenced"] = c.fenced;
    if (!c.token.empty()) member["token"] = ShownToken(c.token);
    member["last_success"] = FormatTime(*h.last_ok);
  }
  if (h.writable_since) member["writable_since"] = FormatTime(*h.writable_since);
  if (h.last_seen_writable) member["last_seen_writable"] = FormatTime(*h.last_seen_writable);
}

// The member's standing with the lock (clusters with a lock store).
void AddLockFields(const MemberSpec& spec, const MemberHistory* h, const Assessment& a,
                   nlohmann::json& member) {
  member["zombie"] = Contains(a.zombies, spec.name);
  member["holds_lock"] = a.lock_readable && a.lock_holder == spec.name;
  if (h != nullptr && h->last_seen_holding) {
    member["last_seen_holding_lock"] = FormatTime(*h->last_seen_holding);
  }
}

// What the member's manager (Patroni's REST API) said, when it has one.
void AddManagerFields(const MemberHistory& h, nlohmann::json& member) {
  if (h.last && h.last->patroni) {
    if (const auto* f = std::get_if<ProbeFailure>(&*h.last->patroni)) {
      member["patroni_error"] = {{"reason", ReasonName(f->reason)}, {"message", f->message}};
    }
  }
  if (h.last_patroni) {
    const PatroniReading& p = *h.last_patroni;
    member["patroni"] = {{"role", p.role},   {"state", p.state},
                         {"scope", p.scope}, {"timeline", p.timeline},
                         {"pause", p.pause}, {"cluster_unlocked", p.cluster_unlocked}};
    if (p.dcs_last_seen) member["patroni"]["dcs_last_seen"] = *p.dcs_last_seen;
  }
}

// Whom the member's WAL receiver streams from, read this round: a member's name when its
// sender matches a member's address (SenderMember), else the raw host:port; null when it
// was read and runs no receiver (a primary, or a standby that lost its upstream).
void AddStreamsFrom(const MemberHistory& h, const std::vector<MemberSpec>& members,
                    nlohmann::json& member) {
  const PostgresReading* r = h.last ? h.last->reading() : nullptr;
  if (r == nullptr) return;
  if (!r->upstream) {
    member["streams_from"] = nullptr;
    return;
  }
  const WalReceiverReading& up = *r->upstream;
  if (up.hidden) {
    member["streams_from"] = {{"from", "hidden"}, {"hidden", true}};
    return;
  }
  const std::string name = SenderMember(up, members);
  const std::string address = SenderAddress(up);
  member["streams_from"] = {{"from", name.empty() ? address : name},
                            {"member", name.empty() ? nlohmann::json() : nlohmann::json(name)},
                            {"address", address},
                            {"status", up.status},
                            {"timeline", up.received_tli},
                            {"flushed_lsn", up.flushed_lsn},
                            {"latest_end_time", up.latest_end_time}};
}

// For each member writable this round, the members read streaming from it in the same round.
nlohmann::json WitnessesJson(const ClusterSnapshot& c) {
  std::vector<std::string> writable = c.assessment.writable;
  writable.insert(writable.end(), c.assessment.drift.begin(), c.assessment.drift.end());
  nlohmann::json out = nlohmann::json::object();
  for (const auto& w : Witnesses(c.spec.members, c.last_round, writable))
    out[w.primary] = w.streamers;
  return out;
}

// Every witness's view of the primary side by side, the majority of the fresh ones, and which
// view disagrees with it or is stale.
nlohmann::json WitnessViewsJson(const ClusterSnapshot& c) {
  const WitnessTable table = WitnessViews(c);
  nlohmann::json out = {
      {"majority", table.majority.empty() ? nlohmann::json() : nlohmann::json(table.majority)},
      {"views", nlohmann::json::array()}};
  for (const auto& v : table.views) {
    out["views"].push_back({{"witness", v.witness},
                            {"names", v.names.empty() ? nlohmann::json() : nlohmann::json(v.names)},
                            {"as_of", FormatTime(v.as_of)},
                            {"stale", v.stale},
                            {"disagrees", v.disagrees}});
  }
  return out;
}

nlohmann::json MemberJson(const ClusterSnapshot& c, const MemberSpec& spec) {
  const Assessment& a = c.assessment;
  auto it = c.history.members.find(spec.name);
  const MemberHistory* h = it == c.history.members.end() ? nullptr : &it->second;
  nlohmann::json member = {
      {"name", spec.name}, {"address", RedactedUrl(spec.address)}, {"state", MemberState(h)}};
  if (h != nullptr) AddProbeFields(*h, a.lineage, member);
  if (h != nullptr && !h->last_reading && h->last_claim) {
    // Another kind's lineages may be linked (Redis replid2): judged as the verdict does.
    member["in_lineage"] = LineageLinks(c.last_round).Same(h->last_claim->lineage, a.lineage);
  }
  member["suspect"] = Contains(a.suspects, spec.name);
  if (spec.discovered) member["discovered"] = true;
  if (c.lock.has_store) AddLockFields(spec, h, a, member);
  if (h != nullptr) AddManagerFields(*h, member);
  if (h != nullptr) AddStreamsFrom(*h, c.spec.members, member);
  return member;
}

// One line for people: the fork point, the double-write window, each holder's WAL since.
std::string WriteWindowSummary(const WriteWindow& w) {
  std::ostringstream out;
  out << (w.ForkPoint().empty() ? w.fork_unknown_reason : "fork at " + w.ForkPoint());
  if (w.double_write_seconds) {
    out << "; two writable for " << static_cast<std::int64_t>(*w.double_write_seconds) << "s";
  }
  for (const auto& h : w.holders) {
    out << "; " << h.member << ": ";
    if (h.wal_bytes_since_fork) {
      out << *h.wal_bytes_since_fork << " bytes of " << w.written << " since the fork";
    } else {
      out << w.written << " since the fork unknown (" << h.unknown_reason << ")";
    }
  }
  return out.str();
}

// During an incident: the fork point, the double-write window and each holder's WAL since the
// fork, or why each is unknown (a missing number is never shown as zero).
void AddWriteWindow(const WriteWindow& w, nlohmann::json& cluster) {
  nlohmann::json window = {{"summary", WriteWindowSummary(w)},
                           {"holders", nlohmann::json::array()}};
  if (!w.fork_lsn.empty()) {
    window["fork_lsn"] = w.fork_lsn;
    window["fork_timeline"] = w.fork_timeline;
  } else if (w.fork_repl_offset) {
    window["fork_repl_offset"] = *w.fork_repl_offset;
  } else {
    window["fork_unknown_reason"] = w.fork_unknown_reason;
  }
  if (w.double_write_seconds) window["double_write_seconds"] = *w.double_write_seconds;
  for (const auto& h : w.holders) {
    nlohmann::json holder = {{"member", h.member}};
    if (h.first_writable) holder["first_seen_writable"] = FormatTime(*h.first_writable);
    if (h.last_writable) holder["last_seen_writable"] = FormatTime(*h.last_writable);
    if (h.wal_bytes_since_fork) {
      holder["wal_bytes_since_fork"] = *h.wal_bytes_since_fork;
    } else {
      holder["wal_bytes_since_fork_unknown_reason"] = h.unknown_reason;
    }
    window["holders"].push_back(holder);
  }
  cluster["write_window"] = window;
  for (auto& member : cluster["members"]) {
    for (const auto& h : window["holders"]) {
      if (h["member"] == member["name"] && h.contains("wal_bytes_since_fork")) {
        member["wal_bytes_since_fork"] = h["wal_bytes_since_fork"];
      }
    }
  }
}

// Fencing-aware severity: the tokens the fence is judged by and what it decided. Patroni's
// tokens are the leader key's revision and the leader's timeline.
nlohmann::json FencingJson(const ClusterSnapshot& c) {
  const Assessment& a = c.assessment;
  nlohmann::json fencing = {{"split_brain_fenced", a.split_brain_fenced},
                            {"fenced_zombies", a.fenced_zombies},
                            {"regressions", a.fencing_regressions}};
  if (a.resource_token) {
    fencing["resource_token"] = *a.resource_token;
    fencing["resource_token_unissued"] = a.resource_token_unissued;
  }
  if (!a.fencing_warning.empty()) fencing["warning"] = a.fencing_warning;
  if (c.last_good_dcs) {
    fencing["lock_revision"] = c.last_good_dcs->mod_revision;
    if (c.last_good_dcs->store_revision > 0) {
      fencing["store_revision"] = c.last_good_dcs->store_revision;
    }
  }
  for (const Observation& obs : c.last_round) {
    const PostgresReading* reading = obs.reading();
    if (reading != nullptr && obs.member == a.lock_holder) {
      fencing["holder_timeline"] = reading->timeline;
    }
  }
  return fencing;
}

// A cluster with a round: its verdict, the evidence behind it and every member.
void AddRoundFields(const ClusterSnapshot& c, nlohmann::json& cluster) {
  const Assessment& a = c.assessment;
  cluster["verdict"] = VerdictName(a.verdict);
  cluster["raw_verdict"] = VerdictName(a.raw_verdict);
  cluster["summary"] = a.summary;
  cluster["suppressions"] = SuppressionsJson(a.suppressions);
  cluster["suppressed_split_brain"] = a.suppressed_split_brain;
  cluster["transitions"] = c.transitions;
  if (c.spec.discovery.enabled) {
    cluster["discovery"] = {{"max_members", c.spec.discovery.max_members},
                            {"not_probed", c.discovery_rejected},
                            {"expired", c.discovered_expired}};
  }
  if (c.last_transition) {
    cluster["last_transition"] = {{"at", FormatTime(c.last_transition_at)},
                                  {"members", c.last_transition->members},
                                  {"evidence", c.last_transition->summary}};
  }
  cluster["lineage_forks"] = LineageForksJson(c.forks);
  cluster["verdict_since"] = FormatTime(c.verdict_since);
  cluster["lineage"] = a.lineage;
  cluster["last_round"] = FormatTime(c.last_round_end);
  cluster["evidence"] = {{"writable", a.writable},
                         {"drift", a.drift},
                         {"suspects", a.suspects},
                         {"unreadable", a.unreadable},
                         {"writable_per_lineage", a.writable_per_lineage}};
  if (c.lock.has_store) {
    cluster["lock"] = LockJson(c);
    cluster["evidence"]["zombies"] = a.zombies;
    cluster["fencing"] = FencingJson(c);
  }
  if (!c.spec.scope.empty()) cluster["evidence"]["other_scope"] = a.other_scope;
  if (!a.fenced.empty()) cluster["evidence"]["fenced"] = a.fenced;
  cluster["witnesses"] = WitnessesJson(c);
  cluster["witness_views"] = WitnessViewsJson(c);
  if (nlohmann::json remediation = RemediationJson(c.remediation); !remediation.is_null()) {
    cluster["remediation"] = std::move(remediation);
  }
  cluster["confirmations"] = {{"confirmed", c.confirmations_accepted},
                              {"rejected", c.confirmations_rejected}};
  for (const auto& spec : c.spec.members) cluster["members"].push_back(MemberJson(c, spec));
  if (c.write_window) AddWriteWindow(*c.write_window, cluster);
}

nlohmann::json ClusterJson(const ClusterSnapshot& c) {
  const Timing timing = c.timing();
  nlohmann::json cluster = {{"name", c.spec.name},
                            {"ttl_seconds", timing.ttl.count() / 1000.0},
                            {"probe_interval_seconds", timing.probe_interval.count() / 1000.0},
                            {"probe_timeout_seconds", timing.probe_timeout.count() / 1000.0},
                            {"rounds", c.rounds},
                            {"members", nlohmann::json::array()}};
  // Said only where a value is not the config's: "default", "lock store", "ttl/10".
  if (std::string_view(timing.ttl_source) != "config") cluster["ttl_source"] = timing.ttl_source;
  if (std::string_view(timing.interval_source) != "config") {
    cluster["probe_interval_source"] = timing.interval_source;
  }
  if (c.has_round) {
    AddRoundFields(c, cluster);
  } else {
    cluster["verdict"] = "pending";
    cluster["summary"] = "no round finished yet";
  }
  return cluster;
}

}  // namespace

nlohmann::json StatusJson(const std::vector<ClusterSnapshot>& clusters,
                          const DeclarationsView* declarations) {
  nlohmann::json out = {{"clusters", nlohmann::json::array()}};
  if (declarations != nullptr) AddDeclarations(*declarations, WallClock::now(), out);
  for (const auto& c : clusters) out["clusters"].push_back(ClusterJson(c));
  return out;
}

namespace {

const std::vector<std::string>& TableHeaders() {
  static const std::vector<std::string> headers = {
      "Member", "Host", "State", "TL", "WAL", "System identifier", "Last seen writable"};
  return headers;
}

// One table row per member, in TableHeaders() order.
std::vector<std::vector<std::string>> MemberRows(const nlohmann::json& cluster) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : cluster["members"]) {
    auto text = [&](const char* key) {
      if (!m.contains(key)) return std::string();
      return m[key].is_string() ? m[key].get<std::string>() : JsonText(m[key]);
    };
    std::string state = text("state");
    if (m.value("holds_lock", false)) state += " LEADER-KEY";
    if (m.value("zombie", false)) state += " ZOMBIE";
    if (m.value("suspect", false)) state += " SUSPECT";
    if (m.contains("in_lineage") && !m["in_lineage"].get<bool>()) state += " OTHER-LINEAGE";
    rows.push_back({text("name"), text("address"), state, text("timeline"), text("wal_lsn"),
                    text("system_identifier"), text("last_seen_writable")});
  }
  return rows;
}

// The member table under a title rule naming the cluster (and its lineage once known).
void MemberTableText(const nlohmann::json& cluster, std::ostream& out) {
  const std::vector<std::string>& headers = TableHeaders();
  const std::vector<std::vector<std::string>> rows = MemberRows(cluster);
  std::vector<size_t> widths;
  for (const auto& h : headers) widths.push_back(h.size());
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string rule = "+";
  for (size_t w : widths) rule += std::string(w + 2, '-') + "+";
  std::string title = "+ Cluster: " + cluster["name"].get<std::string>() + " ";
  if (cluster.contains("lineage")) {
    title += "(lineage " + cluster["lineage"].get<std::string>() + ") ";
  }
  out << title << (title.size() < rule.size() ? rule.substr(title.size()) : "") << "\n";
  auto print_row = [&](const std::vector<std::string>& row) {
    out << "|";
    for (size_t i = 0; i < row.size(); ++i) {
      out << " " << row[i] << std::string(widths[i] - row[i].size(), ' ') << " |";
    }
    out << "\n";
  };
  print_row(headers);
  out << rule << "\n";
  for (const auto& row : rows) print_row(row);
  out << rule << "\n";
}

void LockText(const nlohmann::json& lock, std::ostream& out) {
  out << "Lock: scope " << lock["scope"].get<std::string>();
  if (lock["readable"].get<bool>()) {
    out << ", leader key held by "
        << (lock.value("holder", "").empty() ? "nobody" : lock["holder"].get<std::string>())
        << " (lease " << lock.value("lease_ttl_remaining_seconds", -1) << "s left, revision "
        << lock.value("mod_revision", 0) << ")";
    if (lock.contains("holder_token")) {
      out << ", token " << lock["holder_token"].get<std::string>();
    }
  } else {
    out << ", UNREADABLE: " << lock.value("error", "");
  }
  out << "\n";
}

void SuppressionsText(const nlohmann::json& cluster, std::ostream& out) {
  for (const auto& s : cluster.value("suppressions", nlohmann::json::array())) {
    out << "  Suppressed by " << s["suppressor"].get<std::string>();
    if (!s["kind"].get<std::string>().empty()) {
      out << " (" << s["kind"].get<std::string>() << " " << s["declaration"].get<std::string>()
          << ")";
    }
    out << ": hides " << s["hidden_verdict"].get<std::string>() << "; "
        << s["reason"].get<std::string>() << "; until " << s["expires"].get<std::string>() << "\n";
  }
}

void LineageForksText(const nlohmann::json& cluster, std::ostream& out) {
  for (const auto& f : cluster.value("lineage_forks", nlohmann::json::array())) {
    out << "  Lineage " << f["lineage"].get<std::string>() << " also writable in "
        << JsonText(f["with"]);
    const size_t total = f.value("with_total", size_t{0});
    if (total > f["with"].size()) out << " and " << total - f["with"].size() << " more";
    if (f.contains("declared_by")) {
      out << " (declared cutover " << f["declared_by"].get<std::string>() << ": "
          << f["reason"].get<std::string>() << ", until " << f["expires"].get<std::string>() << ")";
    } else {
      out << " (not declared)";
    }
    out << "\n";
  }
}

void MemberErrorsText(const nlohmann::json& cluster, std::ostream& out) {
  for (const auto& m : cluster["members"]) {
    if (m.contains("error")) {
      out << "  " << m["name"].get<std::string>() << ": " << m["error"]["reason"].get<std::string>()
          << ": " << m["error"]["message"].get<std::string>() << "\n";
    }
  }
}

// "Witnesses: pg-b, pg-c stream from pg-a; nobody streams from pg-d".
void WitnessesText(const nlohmann::json& cluster, std::ostream& out) {
  if (!cluster.contains("witnesses") || cluster["witnesses"].empty()) return;
  std::vector<Witness> witnesses;
  for (const auto& [primary, streamers] : cluster["witnesses"].items()) {
    witnesses.push_back(Witness{primary, streamers.get<std::vector<std::string>>()});
  }
  out << "Witnesses: " << WitnessText(witnesses) << "\n";
}

// "Who each witness names: pg-a itself: pg-a (disagrees); the lock store: pg-b (stale)".
void WitnessViewsText(const nlohmann::json& cluster, std::ostream& out) {
  if (!cluster.contains("witness_views") || cluster["witness_views"]["views"].empty()) return;
  out << "Who each witness names as primary:";
  const char* separator = " ";
  for (const auto& v : cluster["witness_views"]["views"]) {
    out << separator << v["witness"].get<std::string>() << ": "
        << (v["names"].is_string() ? v["names"].get<std::string>() : "nobody");
    if (v["disagrees"].get<bool>()) out << " (disagrees with the majority)";
    if (v["stale"].get<bool>()) out << " (stale, from " << v["as_of"].get<std::string>() << ")";
    separator = "; ";
  }
  out << "\n";
}

void WriteWindowText(const nlohmann::json& cluster, std::ostream& out) {
  if (!cluster.contains("write_window")) return;
  out << "Write window: " << cluster["write_window"]["summary"].get<std::string>() << "\n";
}

void RemediationText(const nlohmann::json& cluster, std::ostream& out) {
  if (!cluster.contains("remediation")) return;
  const nlohmann::json& r = cluster["remediation"];
  out << "Remediation: " << r.value("mode", "") << " (" << r.value("action", "") << ")";
  if (r.contains("hold")) out << "; holds: " << r.value("hold", "");
  out << "\n";
  for (const auto& record : r["records"]) {
    out << "  " << record.value("requested", "") << " " << record.value("mode", "") << " "
        << record.value("member", "") << ": " << record.value("result", "") << " ("
        << record.value("detail", "") << ")";
    if (record.contains("undo")) out << "; undo: " << record.value("undo", "");
    out << "\n";
  }
}

void ClusterText(const nlohmann::json& cluster, std::ostream& out) {
  MemberTableText(cluster, out);
  if (cluster.contains("lock")) LockText(cluster["lock"], out);
  WitnessesText(cluster, out);
  WitnessViewsText(cluster, out);
  out << "Verdict: " << cluster["verdict"].get<std::string>() << " - "
      << cluster["summary"].get<std::string>() << "\n";
  SuppressionsText(cluster, out);
  LineageForksText(cluster, out);
  WriteWindowText(cluster, out);
  RemediationText(cluster, out);
  MemberErrorsText(cluster, out);
  out << "\n";
}

void DeclarationsText(const nlohmann::json& status, std::ostream& out) {
  if (!status.contains("declarations") || status["declarations"].empty()) return;
  out << "Declarations:\n";
  for (const auto& d : status["declarations"]) {
    out << "  " << d["id"].get<std::string>() << ": " << d["kind"].get<std::string>() << " of "
        << d["cluster"].get<std::string>();
    if (!d["scope"].get<std::string>().empty()) out << " scope " << d["scope"].get<std::string>();
    if (!d["member"].get<std::string>().empty()) {
      out << " member " << d["member"].get<std::string>();
    }
    // A silence says which Alertmanagers hold it: where to look, and expire it.
    const std::string source = d["source"].get<std::string>();
    out << " by " << d["author"].get<std::string>() << " (" << source
        << (source == "alertmanager" ? " " + d["origin"].get<std::string>() : "")
        << "): " << d["reason"].get<std::string>() << "; "
        << (d["active"].get<bool>() ? "until " : "EXPIRED ") << d["expires"].get<std::string>()
        << "\n";
  }
}

void DeclarationErrorsText(const nlohmann::json& status, std::ostream& out) {
  if (!status.contains("declaration_errors") || status["declaration_errors"].empty()) return;
  out << "Rejected declaration files:\n";
  for (const auto& e : status["declaration_errors"]) out << "  " << e.get<std::string>() << "\n";
}

}  // namespace

std::string StatusText(const std::vector<ClusterSnapshot>& clusters,
                       const DeclarationsView* declarations) {
  std::ostringstream out;
  const nlohmann::json status = StatusJson(clusters, declarations);
  for (const auto& cluster : status["clusters"]) ClusterText(cluster, out);
  DeclarationsText(status, out);
  DeclarationErrorsText(status, out);
  SilencesText(status, out);
  return out.str();
}

}  // namespace sbd
