#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "detector/engine/cluster_state.h"
#include "detector/output/incident_log.h"
#include "suppressors/declaration_store.h"

namespace sbd {

/// The incident log's events of the named clusters (IncidentLog::EventsOf), asked once per
/// page for the clusters in an incident or out of one for less than kRecentIncident.
using IncidentEventSource =
    std::function<std::vector<IncidentEvent>(const std::set<std::string>& clusters)>;

/// What the status page draws besides /status. Plain value type.
struct StatusPageOptions {
  /// The incident log, for the charts of clusters in (or just out of) an incident; without
  /// it, every cluster gets its members' writable streaks.
  IncidentEventSource incidents;
  /// A meta refresh every 5 s, with a link to the page without it (GET /?refresh=off) for
  /// whoever cannot read a page that reloads under them (a screen reader, say).
  bool auto_refresh = true;
};

/// The status page (GET /) as one self-contained HTML document: problems first, healthy
/// clusters folded, an inline SVG per cluster, no script and no external resource. Rendered
/// from StatusJson, so it shows what /status shows and never a secret; every string in it is
/// escaped. A cluster in an incident (or just out of one) has its timeline charted from
/// the incident log (incident_chart.h); without events, the members' writable streaks. Pure
/// apart from calling `options.incidents`.
std::string StatusHtml(const std::vector<ClusterSnapshot>& clusters,
                       const DeclarationsView* declarations, WallClock::time_point now,
                       const StatusPageOptions& options = {});

/// The same page from a /status JSON document (what the exporter's status source returns).
/// A document that is not JSON, or lacks parts, gives a page that says so; never throws on
/// its content.
std::string StatusHtmlFromJson(const nlohmann::json& status, WallClock::time_point now,
                               const StatusPageOptions& options = {});

/// StatusHtmlFromJson over JSON text; text that does not parse gives an error page.
std::string StatusHtmlFromJsonText(const std::string& status_json, WallClock::time_point now,
                                   const StatusPageOptions& options = {});

/// The response headers the page is served with: a Content-Security-Policy that allows
/// inline styles and nothing else (no script, no fetch, no frame, no form), nosniff, no
/// referrer and no caching.
const std::vector<std::pair<std::string, std::string>>& StatusPageHeaders();

/// `text` cut to at most `max_bytes` bytes on a UTF-8 character boundary, with "\u2026" after
/// it when cut; whole when it fits. Not escaped. Pure.
std::string Shortened(const std::string& text, size_t max_bytes);

/// Escapes `text` for HTML text and quoted attribute values (& < > " '), and replaces
/// invalid UTF-8 and control characters (other than tab and newline) with U+FFFD.
std::string HtmlEscape(const std::string& text);

}  // namespace sbd
