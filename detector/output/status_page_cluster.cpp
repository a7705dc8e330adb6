#include <algorithm>
#include <set>
#include <sstream>

#include "detector/common/logfmt.h"
#include "detector/common/network_text.h"
#include "detector/config/declaration.h"
#include "detector/output/incident_chart.h"
#include "detector/output/status.h"
#include "detector/output/status_page_parts.h"

namespace sbd::status_page {
namespace {

// --- One cluster.

std::string MemberState(const json& m) {
  const std::string state = Str(m, "state");
  std::string html = "<span class=\"" + std::string(state == "writable" ? "writable" : "") + "\">" +
                     HtmlEscape(state) + "</span>";
  if (Bool(m, "holds_lock")) html += " <b>leader key</b>";
  if (Bool(m, "zombie")) html += " <span class=\"badge crit\">zombie</span>";
  if (Bool(m, "suspect")) html += " <span class=\"badge crit\">suspect</span>";
  const json& in_lineage = Field(m, "in_lineage");
  if (in_lineage.is_boolean() && !in_lineage.get<bool>()) {
    html += " <span class=\"badge warn\">other lineage</span>";
  }
  if (Bool(m, "discovered")) html += " <span class=\"muted\">(discovered)</span>";
  return html;
}

// Patroni's role when its REST API answered, else what PostgreSQL's state implies.
std::string MemberRole(const json& m) {
  const json& patroni = Field(m, "patroni");
  if (patroni.is_object()) {
    return HtmlEscape(Str(patroni, "role")) + " <span class=\"muted\">(Patroni, " +
           HtmlEscape(Str(patroni, "state")) + ")</span>";
  }
  const std::string state = Str(m, "state");
  if (state == "writable") return "primary";
  if (state == "replica") return "replica";
  return "";
}

// The system identifier's last six digits (where lineages of one site differ), whole on hover.
std::string ShortSystemId(const std::string& id) {
  if (id.empty()) return "";
  const std::string e = HtmlEscape(id);
  if (id.size() <= 8) return "<code>" + e + "</code>";
  return "<code title=\"" + e + "\">\u2026" + HtmlEscape(id.substr(id.size() - 6)) + "</code>";
}

std::string LastProbe(const json& m, WallClock::time_point now) {
  const json& error = Field(m, "error");
  if (error.is_object()) {
    return "<span class=\"badge unk\">failed</span> " + Esc(error, "reason") + ": " +
           Esc(error, "message");
  }
  if (!Field(m, "probed_at").is_string()) return "<span class=\"muted\">never</span>";
  std::string html = "ok " + TimeHtml(Str(m, "probed_at"), now);
  if (auto secs = Num(m, "probe_seconds")) html += " in " + Fixed(*secs * 1000, 0) + " ms";
  const json& patroni_error = Field(m, "patroni_error");
  if (patroni_error.is_object()) {
    html += "; Patroni API: " + Esc(patroni_error, "reason") + ": " + Esc(patroni_error, "message");
  }
  return html;
}

// Whom the member's WAL receiver streams from (status.cpp's streams_from): a member, or the
// raw host:port of a server that is not one; empty when not read this round.
std::string StreamsFrom(const json& m) {
  if (!m.is_object() || !m.contains("streams_from")) return "";
  const json& from = Field(m, "streams_from");
  if (from.is_null()) return "<span class=\"muted\">nobody</span>";
  if (Bool(from, "hidden")) {
    return "<span class=\"muted\">hidden (the role lacks pg_read_all_stats)</span>";
  }
  std::string html = Field(from, "member").is_string()
                         ? Esc(from, "member")
                         : "<code>" + Esc(from, "address") + "</code> (not a member)";
  return html + " <span class=\"muted\">(" + Esc(from, "status") + ", TL " + Esc(from, "timeline") +
         ", flushed " + Esc(from, "flushed_lsn") + ")</span>";
}

void MemberTable(const json& cluster, WallClock::time_point now, std::ostream& out) {
  out << "<table><caption>Members of " << Esc(cluster, "name")
      << "</caption><thead><tr><th scope=\"col\">Member</th><th scope=\"col\">Address</th>"
         "<th scope=\"col\">State</th><th scope=\"col\">Role</th>"
         "<th scope=\"col\">Streams from</th><th scope=\"col\" abbr=\"System id\">System "
         "identifier</th>"
         "<th scope=\"col\">Timeline</th>"
         "<th scope=\"col\" abbr=\"Last writable\">Last seen writable</th><th scope=\"col\">Last "
         "probe</th>"
         "</tr></thead><tbody>";
  for (const auto& m : Array(cluster, "members")) {
    const std::string writable_seen = Str(m, "last_seen_writable");
    // A long name gets a short form for screen readers that repeat the row header per cell.
    const std::string name = Str(m, "name");
    out << "<tr><th scope=\"row\""
        << (name.size() > 15 ? " abbr=\"" + HtmlEscape(Shortened(name, 12)) + "\"" : "") << ">"
        << HtmlEscape(name) << "</th><td>" << HtmlEscape(RedactedUrl(Str(m, "address")))
        << "</td><td>" << MemberState(m) << "</td><td>" << MemberRole(m) << "</td><td>"
        << StreamsFrom(m) << "</td><td>" << ShortSystemId(Str(m, "system_identifier"))
        << "</td><td>" << Esc(m, "timeline") << "</td><td>"
        << (writable_seen.empty() ? "<span class=\"muted\">never</span>"
                                  : TimeHtml(writable_seen, now))
        << "</td><td>" << LastProbe(m, now) << "</td></tr>";
  }
  out << "</tbody></table>";
}

// Every witness's view of the primary side by side; the one that disagrees with the majority
// of fresh views and the stale ones are marked in words, not colour alone.
void WitnessViewTable(const json& cluster, WallClock::time_point now, std::ostream& out) {
  const json& table = Field(cluster, "witness_views");
  if (!table.is_object() || Array(table, "views").empty()) return;
  const std::string majority = Str(table, "majority");
  out << "<table class=\"witnesses\"><caption>Who each witness of " << Esc(cluster, "name")
      << " names as primary"
      << (majority.empty() ? std::string(" (no majority)")
                           : " (majority: " + HtmlEscape(majority) + ")")
      << "</caption><thead><tr><th scope=\"col\">Witness</th><th scope=\"col\">Names</th>"
         "<th scope=\"col\">Read</th><th scope=\"col\">Mark</th></tr></thead><tbody>";
  for (const auto& v : Array(table, "views")) {
    const bool disagrees = Field(v, "disagrees").is_boolean() && Field(v, "disagrees").get<bool>();
    const bool stale = Field(v, "stale").is_boolean() && Field(v, "stale").get<bool>();
    std::string mark;
    if (disagrees) mark += "<b>&#x2716; disagrees with the majority</b> ";
    if (stale) mark += "<span class=\"muted\">&#x231B; stale: this round's read failed</span>";
    const std::string names = Str(v, "names");
    // A long witness gets a short form, as member names do (tidy's header abbreviation check).
    const std::string witness = Str(v, "witness");
    out << "<tr" << (disagrees ? " class=\"bad\"" : "") << "><th scope=\"row\""
        << (witness.size() > 15 ? " abbr=\"" + HtmlEscape(Shortened(witness, 12)) + "\"" : "")
        << ">" << HtmlEscape(witness) << "</th><td>"
        << (names.empty() ? "<span class=\"muted\">nobody</span>" : HtmlEscape(names))
        << "</td><td>" << TimeHtml(Str(v, "as_of"), now) << "</td><td>" << mark << "</td></tr>";
  }
  out << "</tbody></table>";
}

// The lock store's holder and lease, as of its last successful read.
void LockLine(const json& lock, WallClock::time_point now, std::ostream& out) {
  // Patroni's lock is named by its scope; other kinds' by where the store keeps the record.
  const std::string scope = Str(lock, "scope");
  const std::string record = Str(lock, "record");
  out << "<p class=\"lock\">Lock";
  if (!scope.empty()) {
    out << " (scope <code>" << HtmlEscape(scope) << "</code>)";
  } else if (!record.empty()) {
    out << " (<code>" << HtmlEscape(record) << "</code>)";
  }
  out << ": ";
  if (!Bool(lock, "readable")) {
    out << "<span class=\"badge unk\">unreadable</span> " << Esc(lock, "error") << ". ";
  }
  if (!Field(lock, "last_success").is_string()) {
    out << "never read.</p>";
    return;
  }
  const std::string holder = Str(lock, "holder");
  out << (holder.empty() ? (scope.empty() ? "no holder recorded" : "no leader key")
                         : "held by <b>" + HtmlEscape(holder) + "</b>");
  const std::optional<WallTime> read_at = ParseRfc3339(Str(lock, "last_success"));
  const std::optional<double> remaining = Num(lock, "lease_ttl_remaining_seconds");
  if (!holder.empty() && remaining && *remaining >= 0 && read_at) {
    const double left = std::max(0.0, *remaining - SecondsBetween(*read_at, now));
    out << ", lease left about <b>" << Fixed(left, 0) << " s</b>";
    if (auto granted = Num(lock, "lease_granted_ttl_seconds")) {
      out << " of " << Fixed(*granted, 0) << " s";
    }
  } else if (!holder.empty()) {
    out << ", lease expired or unknown";
  }
  out << " (read " << TimeHtml(Str(lock, "last_success"), now);
  if (!Str(lock, "endpoint").empty()) {
    out << " from " << HtmlEscape(RedactedUrl(Str(lock, "endpoint")));
  }
  out << ").</p>";
}

// Members' writable streaks over the last 60 rounds, as the snapshot knows them: the current
// streak (writable_since to last_seen_writable) as a bar, an ended one as a tick at its last
// writable reading; a dashed line where the current verdict started.
void WritableTimeline(const json& cluster, int index, WallClock::time_point now,
                      std::ostream& out) {
  const json& members = Array(cluster, "members");
  const double interval = Num(cluster, "probe_interval_seconds").value_or(3);
  const double window = std::clamp(60 * interval, 10.0, 3600.0);
  const int label_w = 150, plot_w = 560, row_h = 20, top = 18;
  const int height = top + row_h * static_cast<int>(std::max<size_t>(members.size(), 1)) + 18;
  auto x_of = [&](const std::string& iso) -> std::optional<double> {
    auto at = ParseRfc3339(iso);
    if (!at) return std::nullopt;
    const double ago = SecondsBetween(*at, now);
    return label_w + plot_w * (1 - std::clamp(ago, 0.0, window) / window);
  };
  out << "<svg role=\"img\" width=\"" << label_w + plot_w + 10 << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << label_w + plot_w + 10 << " " << height
      << "\" xmlns=\"http://www.w3.org/2000/svg\"><title>Writable members of "
      << Esc(cluster, "name") << " over the last " << Fixed(window, 0) << " s</title>";
  out << "<rect x=\"" << label_w << "\" y=\"" << top - 4 << "\" width=\"" << plot_w
      << "\" height=\"" << height - top - 14 << "\" fill=\"#f7f7f7\" stroke=\"#ccc\"/>";
  const bool split = Array(Field(cluster, "evidence"), "writable").size() > 1;
  int row = 0;
  for (const auto& m : members) {
    const int y = top + row_h * row++;
    out << "<text x=\"4\" y=\"" << y + 12 << "\" font-size=\"12\">" << Esc(m, "name") << "</text>";
    const auto since = x_of(Str(m, "writable_since"));
    const auto last = x_of(Str(m, "last_seen_writable"));
    const char* fill = split && since ? "#c9302c" : "#3c8d40";
    if (since && last) {
      out << "<rect x=\"" << Fixed(*since, 1) << "\" y=\"" << y + 2 << "\" width=\""
          << Fixed(std::max(3.0, *last - *since), 1) << "\" height=\"" << row_h - 6 << "\" fill=\""
          << fill << "\"/>";
    } else if (last && *last > label_w) {
      out << "<rect x=\"" << Fixed(*last - 1.5, 1) << "\" y=\"" << y + 2 << "\" width=\"3\" "
          << "height=\"" << row_h - 6 << "\" fill=\"#3c8d40\"/>";
    }
  }
  if (auto x = x_of(Str(cluster, "verdict_since")); x && *x > label_w) {
    out << "<line x1=\"" << Fixed(*x, 1) << "\" y1=\"" << top - 6 << "\" x2=\"" << Fixed(*x, 1)
        << "\" y2=\"" << height - 16 << "\" stroke=\"#333\" stroke-dasharray=\"4 3\"/>";
  }
  out << "<text x=\"" << label_w << "\" y=\"" << height - 3 << "\" font-size=\"11\">-"
      << Fixed(window, 0) << " s</text><text x=\"" << label_w + plot_w << "\" y=\"" << height - 3
      << "\" font-size=\"11\" text-anchor=\"end\">now</text><text x=\"" << label_w << "\" y=\"11\" "
      << "font-size=\"11\">writable (bar: current streak; tick: last writable reading; dashed: "
         "verdict since)</text></svg>";
}

// Suppressions the verdict carries and declarations in force for this cluster.
void ClusterDeclarations(const json& cluster, const json& status, WallClock::time_point now,
                         std::ostream& out) {
  const json& suppressions = Array(cluster, "suppressions");
  std::vector<const json*> declarations;
  for (const auto& d : Array(status, "declarations")) {
    if (Bool(d, "active") && Str(d, "cluster") == Str(cluster, "name")) declarations.push_back(&d);
  }
  if (suppressions.empty() && declarations.empty()) return;
  out << "<ul class=\"suppressions\">";
  for (const auto& s : suppressions) {
    out << "<li><span class=\"badge info\">suppressed</span> " << Esc(s, "hidden_verdict") << " by "
        << Esc(s, "suppressor");
    if (!Str(s, "members").empty()) out << " (members " << EscList(Field(s, "members")) << ")";
    out << ": " << Esc(s, "reason");
    if (!Str(s, "declaration").empty()) out << " [declaration " << Esc(s, "declaration") << "]";
    out << ", lapses " << TimeHtml(Str(s, "expires"), now) << "</li>";
  }
  for (const json* d : declarations) {
    out << "<li><span class=\"badge info\">declared</span> " << Esc(*d, "kind") << " by "
        << Esc(*d, "author") << " (" << Esc(*d, "id") << "): " << Esc(*d, "reason")
        << ", until <code>" << Esc(*d, "expires") << "</code></li>";
  }
  out << "</ul>";
}

// " and N more" when a fork names only the first of its other owners.
std::string MoreForkPartners(const json& fork) {
  const json& with = Field(fork, "with");
  const size_t named = with.is_array() ? with.size() : 0;
  const json& total = Field(fork, "with_total");
  if (!total.is_number_unsigned() || total.get<size_t>() <= named) return "";
  return " and " + std::to_string(total.get<size_t>() - named) + " more";
}

// What else the cluster's evidence says that needs a human: forks, members never probed.
void ClusterNotes(const json& cluster, std::ostream& out) {
  if (Bool(cluster, "suppressed_split_brain")) {
    out << "<p class=\"alert crit\"><b>A confirmed split brain is suppressed</b> by a declared "
           "scope: it does not page, but two members are writable.</p>";
  }
  for (const auto& f : Array(cluster, "lineage_forks")) {
    out << "<p class=\"alert warn\">Lineage <code>" << Esc(f, "lineage")
        << "</code> also writable in " << EscList(Field(f, "with")) << MoreForkPartners(f)
        << " (members " << EscList(Field(f, "members")) << ")";
    if (!Str(f, "declared_by").empty()) {
      out << "; declared by " << Esc(f, "declared_by") << ": " << Esc(f, "reason");
    }
    out << ".</p>";
  }
  const json& not_probed = Array(Field(cluster, "discovery"), "not_probed");
  if (!not_probed.empty()) {
    out << "<p class=\"alert warn\">Discovered but not probed (over max_members): "
        << EscList(not_probed) << ".</p>";
  }
}

// What the opt-in remediation did (or would have done) and why it held back, when it is on.
void RemediationNotes(const json& cluster, std::ostream& out) {
  const json& r = Field(cluster, "remediation");
  if (!r.is_object()) return;
  out << "<p class=\"muted\">Remediation: <code>" << Esc(r, "mode") << "</code> ("
      << Esc(r, "action") << ")";
  if (!Str(r, "hold").empty()) out << "; holding back: " << Esc(r, "hold");
  out << "</p>";
  for (const auto& record : Array(r, "records")) {
    const std::string result = Str(record, "result");
    out << "<p class=\"alert " << (result == "fenced" || result == "dry_run" ? "warn" : "crit")
        << "\">" << Esc(record, "mode") << " " << Esc(record, "member") << ": <b>"
        << Esc(record, "result") << "</b> at " << Esc(record, "requested") << " ("
        << Esc(record, "detail") << ")";
    if (!Str(record, "undo").empty()) out << "; undo: <code>" << Esc(record, "undo") << "</code>";
    out << "</p>";
  }
}

// The incident chart from the log when the cluster has one to chart, else the streaks.
void Timeline(const json& cluster, const std::vector<IncidentEvent>& events, int index,
              WallClock::time_point now, std::ostream& out) {
  std::vector<ChartMember> members;
  for (const auto& m : Array(cluster, "members")) {
    members.push_back({Str(m, "name"), Str(m, "state")});
  }
  const std::string chart =
      IncidentChartHtml(Str(cluster, "name"), Str(cluster, "verdict"), members, events, now, index);
  if (chart.empty()) {
    WritableTimeline(cluster, index, now, out);
  } else {
    out << chart;
  }
}

}  // namespace

// The events of every cluster in an incident or out of one for less than kRecentIncident.
EventsByCluster ChartEvents(const json& status, WallClock::time_point now,
                            const IncidentEventSource& incidents) {
  EventsByCluster by_cluster;
  if (!incidents) return by_cluster;
  std::set<std::string> names;
  for (const auto& c : Array(status, "clusters")) {
    const std::string verdict = Str(c, "verdict");
    const std::optional<WallTime> since = ParseRfc3339(Str(c, "verdict_since"));
    if ((verdict != "healthy" && verdict != "pending") ||
        (since && *since + kRecentIncident >= now)) {
      names.insert(Str(c, "name"));
    }
  }
  if (names.empty()) return by_cluster;
  for (IncidentEvent& e : incidents(names)) {
    if (names.count(e.cluster)) by_cluster[e.cluster].push_back(std::move(e));
  }
  return by_cluster;
}

void ClusterArticle(const json& cluster, const json& status, int index,
                    const std::vector<IncidentEvent>& events, WallClock::time_point now,
                    std::ostream& out) {
  const std::string verdict = Str(cluster, "verdict");
  out << "<article class=\"cluster sev-" << LookOf(verdict).css << "\" id=\"cluster-" << index
      << "\"><h3>" << VerdictBadge(verdict) << " <span class=\"name\">" << Esc(cluster, "name")
      << "</span></h3><p class=\"summary\">" << Esc(cluster, "summary");
  if (Field(cluster, "verdict_since").is_string()) {
    out << " <span class=\"muted\">(verdict since " << TimeHtml(Str(cluster, "verdict_since"), now)
        << "; last round " << TimeHtml(Str(cluster, "last_round"), now) << "; lineage <code>"
        << Esc(cluster, "lineage") << "</code>)</span>";
  }
  out << "</p>";
  if (*LookOf(verdict).runbook != '\0') {
    out << "<p class=\"runbook\">Runbook: <a href=\"runbooks/" << LookOf(verdict).runbook << "\">"
        << LookOf(verdict).runbook << "</a></p>";
  }
  ClusterNotes(cluster, out);
  if (Field(cluster, "write_window").is_object()) {
    out << "<p class=\"alert crit\">Write window: "
        << Esc(Field(cluster, "write_window"), "summary") << "</p>";
  }
  RemediationNotes(cluster, out);
  if (Field(cluster, "lock").is_object()) LockLine(Field(cluster, "lock"), now, out);
  MemberTable(cluster, now, out);
  WitnessViewTable(cluster, now, out);
  Timeline(cluster, events, index, now, out);
  ClusterDeclarations(cluster, status, now, out);
  out << "</article>";
}

}  // namespace sbd::status_page
