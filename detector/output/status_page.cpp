#include "detector/output/status_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "detector/common/json_text.h"
#include "detector/common/logfmt.h"
#include "detector/common/network_text.h"
#include "detector/config/declaration.h"
#include "detector/output/incident_chart.h"
#include "detector/output/status.h"

namespace sbd {
namespace {

using nlohmann::json;

const char* const kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at s[i], or 0 when none starts there or it is
// a C1 control (U+0080-U+009F, encoded C2 80-C2 9F): those are parse errors in HTML.
size_t Utf8Length(const std::string& s, size_t i) {
  const size_t n = Utf8SequenceLength(s, i);
  if (n == 2 && static_cast<unsigned char>(s[i]) == 0xC2 &&
      static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
    return 0;
  }
  return n;
}

// --- Reading the status JSON defensively: a missing or mistyped field reads as empty.

const json& Field(const json& j, const char* key) {
  static const json null_value;
  if (!j.is_object()) return null_value;
  auto it = j.find(key);
  return it == j.end() ? null_value : *it;
}

const json& Array(const json& j, const char* key) {
  static const json empty = json::array();
  const json& value = Field(j, key);
  return value.is_array() ? value : empty;
}

std::string Text(const json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  return JsonText(value);
}

std::string Str(const json& j, const char* key) { return Text(Field(j, key)); }
std::string Esc(const json& j, const char* key) { return HtmlEscape(Str(j, key)); }
bool Bool(const json& j, const char* key) {
  const json& v = Field(j, key);
  return v.is_boolean() && v.get<bool>();
}
std::optional<double> Num(const json& j, const char* key) {
  const json& v = Field(j, key);
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}

// The items of an array of strings, escaped and joined with ", ".
std::string EscList(const json& items) {
  std::string out;
  if (!items.is_array()) return HtmlEscape(Text(items));
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + HtmlEscape(Text(item));
  return out;
}

std::string Fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

double SecondsBetween(WallClock::time_point from, WallClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string Age(double seconds) {
  seconds = std::max(0.0, seconds);  // FormatTime truncates, so a time never reads as ahead
  if (seconds < 10) return Fixed(seconds, 1) + " s ago";
  if (seconds < 120) return Fixed(seconds, 0) + " s ago";
  if (seconds < 7200) return Fixed(seconds / 60, 0) + " min ago";
  if (seconds < 172800) return Fixed(seconds / 3600, 0) + " h ago";
  return Fixed(seconds / 86400, 0) + " days ago";
}

// A timestamp from the status JSON as "3.2 s ago", with the exact time on hover.
std::string TimeHtml(const std::string& iso, WallClock::time_point now) {
  const std::optional<WallTime> at = ParseRfc3339(iso);
  if (!at) return HtmlEscape(iso);
  const std::string e = HtmlEscape(iso);
  return "<time datetime=\"" + e + "\" title=\"" + e + "\">" + Age(SecondsBetween(*at, now)) +
         "</time>";
}

// --- Verdicts: text, a symbol and a colour class, and their order on the page.

struct VerdictLook {
  const char* label;
  const char* css;  // crit | warn | unk | info | ok
  const char* symbol;
  int rank;             // 0 first
  const char* runbook;  // under /runbooks/, the one its alert links to; "" for none
};

VerdictLook LookOf(const std::string& verdict) {
  if (verdict == "split_brain") return {"Split brain", "crit", "\u2716", 0, "split-brain.md"};
  if (verdict == "suspected")
    return {"Suspected split brain", "crit", "\u2716", 1, "split-brain-suspected.md"};
  if (verdict == "drift") return {"Lineage drift", "warn", "\u25B2", 2, "inventory-drift.md"};
  if (verdict == "no_primary") return {"No primary", "warn", "\u25B2", 3, ""};
  if (verdict == "unknown") return {"Unknown", "unk", "?", 4, "member-probe-failing.md"};
  if (verdict == "pending") return {"Pending", "unk", "\u2026", 5, ""};
  if (verdict == "suppressed")
    return {"Suppressed", "info", "\u25CF", 6, "split-brain-suppressed.md"};
  if (verdict == "healthy") return {"Healthy", "ok", "\u2714", 7, ""};
  return {"Unrecognised verdict", "unk", "?", 4, ""};
}

// The verdict badge: colour, symbol and words, then the machine name /status uses.
std::string VerdictBadge(const std::string& verdict) {
  const VerdictLook look = LookOf(verdict);
  return std::string("<span class=\"badge ") + look.css + "\">" + look.symbol + " " + look.label +
         "</span> <code class=\"verdict\">" + HtmlEscape(verdict) + "</code>";
}

const char* kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:0 1.5em 2em;color:#1a1a1a;background:#fff}
h1{font-size:1.4em;margin:.6em 0 .2em}h2{font-size:1.15em;margin:1.4em 0 .4em}
h3{font-size:1.05em;margin:0 0 .3em}nav a{margin-right:1em}code{font-size:.95em}
.badge{display:inline-block;padding:.05em .5em;border-radius:.3em;font-weight:600;border:1px solid}
.crit{background:#fde2e1;color:#8a0f0b;border-color:#c9302c}
.warn{background:#fff1d6;color:#6b4500;border-color:#d08c00}
.unk{background:#ececec;color:#333;border-color:#888}
.info{background:#e2ecfb;color:#173e7a;border-color:#3a6fc4}
.ok{background:#e3f4e4;color:#1d5a22;border-color:#3c8d40}
.cluster{border:1px solid #bbb;border-left:.5em solid #888;border-radius:.3em;padding:.6em .9em;
margin:.6em 0}.sev-crit{border-left-color:#c9302c}.sev-warn{border-left-color:#d08c00}
.sev-ok{border-left-color:#3c8d40}.sev-info{border-left-color:#3a6fc4}
.alert{padding:.5em .8em;border-radius:.3em;margin:.4em 0}
table{border-collapse:collapse;margin:.4em 0}th,td{border:1px solid #ccc;padding:.15em .5em;
text-align:left;vertical-align:top}th{background:#f3f3f3}
.writable{font-weight:600}.muted{color:#555}details{margin:.3em 0}summary{cursor:pointer}
svg{display:block;margin:.4em 0;max-width:100%;height:auto}
caption{text-align:left;color:#555;font-size:.9em;padding:.1em 0}
.vh{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);
clip-path:inset(50%);white-space:nowrap}
)";

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

using EventsByCluster = std::map<std::string, std::vector<IncidentEvent>>;

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
  if (Field(cluster, "lock").is_object()) LockLine(Field(cluster, "lock"), now, out);
  MemberTable(cluster, now, out);
  WitnessViewTable(cluster, now, out);
  Timeline(cluster, events, index, now, out);
  ClusterDeclarations(cluster, status, now, out);
  out << "</article>";
}

// --- The page around the clusters.

// Warnings that concern every cluster: the page silenced, silences unreadable, rejected files.
void GlobalWarnings(const json& status, std::ostream& out) {
  const json& page_silences = Array(status, "page_silences");
  if (!page_silences.empty()) {
    out << "<div class=\"alert crit\"><b>The SplitBrain page is silenced in Alertmanager</b>: a "
           "real split brain would page nobody.<ul>";
    for (const auto& s : page_silences) out << "<li>" << HtmlEscape(Text(s)) << "</li>";
    out << "</ul></div>";
  }
  for (const auto& s : Array(status, "silence_sources")) {
    if (Bool(s, "up")) continue;
    out << "<div class=\"alert warn\">Alertmanager " << Esc(s, "alertmanager")
        << " unreadable: " << Esc(s, "error") << "</div>";
  }
  for (const char* key : {"declaration_errors", "silence_errors"}) {
    const json& errors = Array(status, key);
    if (errors.empty()) continue;
    out << "<div class=\"alert warn\">Rejected declarations:<ul>";
    for (const auto& e : errors) out << "<li>" << HtmlEscape(Text(e)) << "</li>";
    out << "</ul></div>";
  }
}

void DeclarationRow(const json& d, std::ostream& out) {
  std::string target = Esc(d, "cluster");
  if (!Str(d, "scope").empty()) target += " scope " + Esc(d, "scope");
  if (!Str(d, "member").empty()) target += " member " + Esc(d, "member");
  out << "<tr><td><code>" << Esc(d, "id") << "</code></td><td>" << Esc(d, "kind") << "</td><td>"
      << target << "</td><td>" << Esc(d, "author") << "</td><td>" << Esc(d, "source") << "</td><td>"
      << Esc(d, "reason") << "</td><td><code>" << Esc(d, "expires") << "</code></td></tr>";
}

void DeclarationsSection(const json& status, std::ostream& out) {
  const json& all = Array(status, "declarations");
  if (all.empty()) return;
  const std::string head =
      "<thead><tr><th scope=\"col\">Id</th><th scope=\"col\">Kind</th>"
      "<th scope=\"col\">For</th><th scope=\"col\">Author</th><th scope=\"col\">Source</th>"
      "<th scope=\"col\">Reason</th><th scope=\"col\">Expires</th></tr></thead><tbody>";
  int expired = 0;
  out << "<section id=\"declarations\"><h2>Declarations in force</h2><table><caption>In force"
         "</caption>"
      << head;
  for (const auto& d : all) {
    if (Bool(d, "active")) {
      DeclarationRow(d, out);
    } else {
      ++expired;
    }
  }
  out << "</tbody></table>";
  if (expired > 0) {
    out << "<details><summary>" << expired << " expired</summary><table><caption>Expired</caption>"
        << head;
    for (const auto& d : all) {
      if (!Bool(d, "active")) DeclarationRow(d, out);
    }
    out << "</tbody></table></details>";
  }
  out << "</section>";
}

void PageHeader(const json& status, size_t problems, size_t total, WallClock::time_point now,
                bool auto_refresh, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      << (auto_refresh ? "<meta http-equiv=\"refresh\" content=\"5\">" : "")
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>"
      << (problems > 0 ? std::to_string(problems) + " problem" + (problems > 1 ? "s" : "") + " - "
                       : std::string())
      << "splitbrain-detector</title><style>" << kStyle << "</style></head><body><header>"
      << "<h1>splitbrain-detector</h1><p>" << total << " cluster" << (total == 1 ? "" : "s") << ": "
      << (problems == 0 ? "<span class=\"badge ok\">\u2714 no problem</span>"
                        : "<span class=\"badge crit\">" + std::to_string(problems) +
                              " with a problem</span>");
  const json& shard = Field(status, "shard");
  if (Num(shard, "total").value_or(1) > 1) {
    out << " &middot; shard " << Esc(shard, "index") << "/" << Esc(shard, "total") << " holds "
        << Esc(shard, "clusters") << " of " << Esc(shard, "configured_clusters") << " clusters";
  }
  out << " &middot; rendered <code>" << FormatTime(now) << "</code>, "
      << (auto_refresh ? "refreshed every 5 s (<a href=\"?refresh=off\">stop refreshing</a>)."
                       : "not refreshing (<a href=\"./\">refresh every 5 s</a>).")
      << "</p><nav><a href=\"status?format=text\">Status as text</a><a href=\"status\">Status "
         "as JSON</a><a href=\"metrics\">Prometheus metrics</a><a href=\"-/healthy\">Liveness "
         "check</a><a href=\"-/ready\">Readiness check</a></nav></header><main>";
}

}  // namespace

std::string Shortened(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "\u2026";
}

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8Length(text, i);
    const char c = text[i];
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(text, i, n);
    } else if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '"') {
      out += "&quot;";
    } else if (c == '\'') {
      out += "&#39;";
    } else if ((c >= 0 && c < 0x20 && c != '\t' && c != '\n') || c == 0x7F) {
      out += kReplacement;
    } else {
      out += c;
    }
    i += n;
  }
  return out;
}

std::string StatusHtmlFromJson(const json& status, WallClock::time_point now,
                               const StatusPageOptions& options) {
  const EventsByCluster events = ChartEvents(status, now, options.incidents);
  static const std::vector<IncidentEvent> none;
  auto events_of = [&](const json& c) -> const std::vector<IncidentEvent>& {
    auto it = events.find(Str(c, "name"));
    return it == events.end() ? none : it->second;
  };
  std::vector<std::pair<const json*, int>> problems, healthy;
  int index = 0;
  for (const auto& c : Array(status, "clusters")) {
    (Str(c, "verdict") == "healthy" ? healthy : problems).push_back({&c, index++});
  }
  // Worst first; the config's order among equals.
  std::stable_sort(problems.begin(), problems.end(), [](const auto& a, const auto& b) {
    return LookOf(Str(*a.first, "verdict")).rank < LookOf(Str(*b.first, "verdict")).rank;
  });
  std::ostringstream out;
  PageHeader(status, problems.size(), problems.size() + healthy.size(), now, options.auto_refresh,
             out);
  if (!Field(status, "clusters").is_array()) {
    out << "<p class=\"alert unk\">The detector's status could not be read; see "
           "<a href=\"status\">/status</a> and the detector's log.</p>";
  }
  GlobalWarnings(status, out);
  if (!problems.empty()) {
    out << "<section id=\"problems\"><h2>Problems (" << problems.size() << ")</h2>";
    for (const auto& [c, i] : problems) ClusterArticle(*c, status, i, events_of(*c), now, out);
    out << "</section>";
  }
  if (!healthy.empty()) {
    out << "<section id=\"healthy\"><h2>Healthy (" << healthy.size() << ")</h2>";
    for (const auto& [c, i] : healthy) {
      out << "<details><summary>" << VerdictBadge("healthy") << " " << Esc(*c, "name")
          << " <span class=\"muted\">" << Esc(*c, "summary") << "</span></summary>";
      ClusterArticle(*c, status, i, events_of(*c), now, out);
      out << "</details>";
    }
    out << "</section>";
  }
  DeclarationsSection(status, out);
  out << "</main></body></html>\n";
  return out.str();
}

std::string StatusHtmlFromJsonText(const std::string& status_json, WallClock::time_point now,
                                   const StatusPageOptions& options) {
  const json status = json::parse(status_json, nullptr, /*allow_exceptions=*/false);
  return StatusHtmlFromJson(status.is_discarded() ? json() : status, now, options);
}

std::string StatusHtml(const std::vector<ClusterSnapshot>& clusters,
                       const DeclarationsView* declarations, WallClock::time_point now,
                       const StatusPageOptions& options) {
  return StatusHtmlFromJson(StatusJson(clusters, declarations), now, options);
}

const std::vector<std::pair<std::string, std::string>>& StatusPageHeaders() {
  static const std::vector<std::pair<std::string, std::string>> headers = {
      {"Content-Security-Policy",
       "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
      {"Cache-Control", "no-store"},
  };
  return headers;
}

}  // namespace sbd
