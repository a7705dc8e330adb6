#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "detector/engine/scheduler.h"
#include "suppressors/declaration_store.h"

namespace sbd {

/// The status page (GET /) as one self-contained HTML document: problems first, healthy
/// clusters folded, an inline SVG per cluster, no script and no external resource. Rendered
/// from StatusJson, so it shows what /status shows and never a secret; every string in it is
/// escaped. Pure apart from reading nothing but its arguments.
std::string StatusHtml(const std::vector<ClusterSnapshot>& clusters,
                       const DeclarationsView* declarations, WallClock::time_point now);

/// The same page from a /status JSON document (what the exporter's status source returns).
/// A document that is not JSON, or lacks parts, gives a page that says so; never throws on
/// its content.
std::string StatusHtmlFromJson(const nlohmann::json& status, WallClock::time_point now);

/// StatusHtmlFromJson over JSON text; text that does not parse gives an error page.
std::string StatusHtmlFromJsonText(const std::string& status_json, WallClock::time_point now);

/// The response headers the page is served with: a Content-Security-Policy that allows
/// inline styles and nothing else (no script, no fetch, no frame, no form), nosniff, no
/// referrer and no caching.
const std::vector<std::pair<std::string, std::string>>& StatusPageHeaders();

/// Escapes `text` for HTML text and quoted attribute values (& < > " '), and replaces
/// invalid UTF-8 and control characters (other than tab and newline) with U+FFFD.
std::string HtmlEscape(const std::string& text);

}  // namespace sbd
