#include <algorithm>
#include <cstdio>

#include "detector/common/json_text.h"
#include "detector/common/logfmt.h"
#include "detector/output/status_page_parts.h"

namespace sbd::status_page {

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

}  // namespace sbd::status_page
