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
#include "detector/output/status_page_parts.h"

namespace sbd {
namespace {

using namespace status_page;

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
