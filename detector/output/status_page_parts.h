#pragma once

// The status page's parts (status_page.cpp draws the page around them): reading the /status
// JSON defensively, times and verdicts as the page shows them, and one cluster's article
// (status_page_cluster.cpp). Internal to the page.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "detector/output/status_page.h"

namespace sbd::status_page {

using nlohmann::json;

// Reading the status JSON defensively: a missing or mistyped field reads as empty.
const json& Field(const json& j, const char* key);
const json& Array(const json& j, const char* key);  ///< [] unless an array
std::string Text(const json& value);                ///< a string as is, else its JSON text
std::string Str(const json& j, const char* key);
std::string Esc(const json& j, const char* key);  ///< Str, HTML-escaped
bool Bool(const json& j, const char* key);
std::optional<double> Num(const json& j, const char* key);
/// The items of an array of strings, escaped and joined with ", ".
std::string EscList(const json& items);

std::string Fixed(double value, int decimals);
double SecondsBetween(WallClock::time_point from, WallClock::time_point to);
/// "3.2 s ago", "5 min ago"...
std::string Age(double seconds);
/// A timestamp from the status JSON as "3.2 s ago", with the exact time on hover.
std::string TimeHtml(const std::string& iso, WallClock::time_point now);

/// A verdict as the page shows it: text, a colour class, a symbol, its order on the page.
struct VerdictLook {
  const char* label;
  const char* css;  // crit | warn | unk | info | ok
  const char* symbol;
  int rank;             // 0 first
  const char* runbook;  // under /runbooks/, the one its alert links to; "" for none
};
VerdictLook LookOf(const std::string& verdict);
/// The verdict badge: colour, symbol and words, then the machine name /status uses.
std::string VerdictBadge(const std::string& verdict);

using EventsByCluster = std::map<std::string, std::vector<IncidentEvent>>;
/// The events of every cluster in an incident or out of one for less than kRecentIncident.
EventsByCluster ChartEvents(const json& status, WallClock::time_point now,
                            const IncidentEventSource& incidents);
/// One cluster's article: verdict, summary, notes, lock, members, witnesses, timeline and
/// declarations.
void ClusterArticle(const json& cluster, const json& status, int index,
                    const std::vector<IncidentEvent>& events, WallClock::time_point now,
                    std::ostream& out);

}  // namespace sbd::status_page
