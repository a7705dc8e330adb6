#include "detector/output/incident_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <sstream>

#include "detector/output/status_page.h"

namespace sbd {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using TimePoint = WallClock::time_point;

// A string field of an event's fields, "" when absent or of another type: events read back
// from the file are untrusted.
std::string Text(const json& object, const std::string& key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

bool IsIncidentVerdict(const std::string& verdict) {
  return !verdict.empty() && verdict != "healthy" && verdict != "pending";
}

void SortByTime(std::vector<IncidentEvent>& events) {
  std::stable_sort(events.begin(), events.end(),
                   [](const IncidentEvent& a, const IncidentEvent& b) { return a.time < b.time; });
}

// The verdict an event leaves the cluster in; "" for an event that does not say.
std::string VerdictAfter(const IncidentEvent& e) {
  if (e.kind == "cluster_added") return Text(e.fields, "verdict");
  if (e.kind == "verdict_changed") return Text(e.fields, "to");
  if (e.kind == "cluster_removed") return "healthy";  // nothing left to chart
  return "";
}

double Seconds(TimePoint from, TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

// Half a minute before the onset, or a fifth of the incident when that is longer.
WallClock::duration Lead(TimePoint onset, TimePoint last) {
  return std::max<WallClock::duration>(seconds(30), (last - onset) / 5);
}

}  // namespace

LaneState LaneStateOf(const std::string& state) {
  if (state == "writable") return LaneState::kWritable;
  if (state == "standby" || state == "read_only" || state == "replica" || state == "read-only") {
    return LaneState::kNotWritable;
  }
  if (state == "unreadable" || state.rfind("unknown (", 0) == 0) return LaneState::kUnreachable;
  return LaneState::kNoData;
}

std::optional<IncidentSpan> FindIncident(std::vector<IncidentEvent> events,
                                         const std::string& verdict, TimePoint now,
                                         std::chrono::seconds recent) {
  if (events.empty()) return std::nullopt;
  SortByTime(events);
  IncidentSpan span;
  bool in = false, seen = false;
  for (const IncidentEvent& e : events) {
    const std::string after = VerdictAfter(e);
    if (after.empty()) continue;
    if (!seen && e.kind == "verdict_changed" && IsIncidentVerdict(Text(e.fields, "from"))) {
      // The log starts inside an incident (truncated or expired): its onset is earlier.
      in = true;
      span = IncidentSpan{events.front().time, false, std::nullopt, Text(e.fields, "from"), {}, {}};
    }
    seen = true;
    if (IsIncidentVerdict(after) && !in) {
      in = true;
      span = IncidentSpan{e.time, e.kind == "verdict_changed", std::nullopt, after, {}, {}};
    } else if (!IsIncidentVerdict(after) && in) {
      in = false;
      span.end = e.time;
    }
  }
  if (IsIncidentVerdict(verdict)) {
    // /status may be a round ahead of the log: what it says now wins.
    if (!in) span = IncidentSpan{now, false, std::nullopt, verdict, {}, {}};
  } else if (in) {
    span.end = now;
  } else if (!span.end) {
    return std::nullopt;
  }
  if (span.end && *span.end + recent < now) return std::nullopt;
  const TimePoint last = span.end.value_or(now);
  span.from = span.onset - Lead(span.onset, last);
  span.to = span.end ? std::min(now, *span.end + Lead(span.onset, last)) : now;
  if (span.to <= span.from) span.to = span.from + seconds(1);
  return span;
}

namespace {

struct Assignment {
  TimePoint at;
  std::string state;
};

// Where `member`'s state was set, oldest first, from one cluster's sorted events.
std::vector<Assignment> Assignments(const std::vector<IncidentEvent>& events,
                                    const std::string& member, const std::string& now_state) {
  const TimePoint horizon = events.empty() ? TimePoint{} : events.front().time;
  std::vector<Assignment> out;
  for (const IncidentEvent& e : events) {
    if (e.kind == "cluster_added") {
      const json& all = e.fields.is_object() ? e.fields.value("members", json()) : json();
      // A member it does not list joined later; its first state is then unknown here.
      const std::string state = Text(all, member);
      if (!state.empty()) out.push_back({e.time, state});
    } else if (e.kind == "cluster_removed") {
      out.push_back({e.time, "removed"});
    } else if (e.kind == "member_state_changed" && Text(e.fields, "member") == member) {
      const std::string before = Text(e.fields, "from");
      if (out.empty() && !before.empty()) out.push_back({horizon, before});
      out.push_back({e.time, Text(e.fields, "to")});
    }
  }
  // No change recorded: the member kept the state it has now for as long as the log goes back.
  if (out.empty()) out.push_back({horizon, now_state.empty() ? "no record" : now_state});
  return out;
}

void AddInterval(MemberLane& lane, TimePoint from, TimePoint to, const std::string& name) {
  if (to <= from) return;
  const std::string shown = name.empty() ? "no record" : name;
  if (!lane.intervals.empty() && lane.intervals.back().state_name == shown &&
      lane.intervals.back().to == from) {
    lane.intervals.back().to = to;
    return;
  }
  lane.intervals.push_back({from, to, LaneStateOf(shown), shown});
}

MemberLane Lane(const std::vector<IncidentEvent>& events, const std::string& member,
                const std::string& now_state, TimePoint from, TimePoint to) {
  MemberLane lane{member, {}};
  const std::vector<Assignment> set = Assignments(events, member, now_state);
  AddInterval(lane, from, std::min(to, set.front().at), "no record");
  for (size_t i = 0; i < set.size(); ++i) {
    const TimePoint until = i + 1 < set.size() ? set[i + 1].at : to;
    AddInterval(lane, std::max(from, set[i].at), std::min(to, until), set[i].state);
  }
  return lane;
}

// Members the events name that `members` does not, by name.
std::set<std::string> OtherMembers(const std::vector<IncidentEvent>& events,
                                   const std::vector<ChartMember>& members) {
  std::set<std::string> names;
  for (const IncidentEvent& e : events) {
    if (e.kind == "member_state_changed" && !Text(e.fields, "member").empty()) {
      names.insert(Text(e.fields, "member"));
    }
    if (e.kind == "cluster_added" && e.fields.is_object()) {
      const json all = e.fields.value("members", json());
      if (all.is_object()) {
        for (const auto& item : all.items()) names.insert(item.key());
      }
    }
  }
  for (const ChartMember& m : members) names.erase(m.name);
  return names;
}

}  // namespace

std::vector<MemberLane> BuildLanes(std::vector<IncidentEvent> events,
                                   const std::vector<ChartMember>& members, TimePoint from,
                                   TimePoint to) {
  SortByTime(events);
  std::vector<MemberLane> lanes;
  for (const ChartMember& m : members) {
    if (lanes.size() == kMaxLanes) return lanes;
    lanes.push_back(Lane(events, m.name, m.state, from, to));
  }
  for (const std::string& name : OtherMembers(events, members)) {
    if (lanes.size() == kMaxLanes) return lanes;
    lanes.push_back(Lane(events, name, "", from, to));
  }
  return lanes;
}

std::vector<std::pair<TimePoint, TimePoint>> DoubleWritable(const std::vector<MemberLane>& lanes) {
  std::vector<std::pair<TimePoint, int>> edges;
  for (const MemberLane& lane : lanes) {
    for (const LaneInterval& i : lane.intervals) {
      if (i.state != LaneState::kWritable) continue;
      edges.push_back({i.from, +1});
      edges.push_back({i.to, -1});
    }
  }
  std::sort(edges.begin(), edges.end());  // at one instant, ends (-1) before starts
  std::vector<std::pair<TimePoint, TimePoint>> out;
  int writable = 0;
  TimePoint start{};
  for (const auto& [at, step] : edges) {
    const int before = writable;
    writable += step;
    if (before < 2 && writable >= 2) start = at;
    if (before >= 2 && writable < 2 && at > start) {
      if (!out.empty() && out.back().second == start) {
        out.back().second = at;
      } else {
        out.push_back({start, at});
      }
    }
  }
  return out;
}

// --- Drawing.

namespace {

constexpr int kLabelW = 170, kPlotW = 600, kRightPad = 40, kTop = 34, kRowH = 22, kAxisH = 44;

// "01:02:03" in UTC.
std::string Clock(TimePoint t) {
  const std::time_t secs = WallClock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buffer;
}

// Whole seconds from the onset, signed: "+30 s", "-15 s", "0 s".
std::string Relative(double secs) {
  const long rounded = std::lround(secs);
  return (rounded > 0 ? "+" : "") + std::to_string(rounded) + " s";
}

std::string Duration(TimePoint from, TimePoint to) {
  return std::to_string(std::lround(Seconds(from, to))) + " s";
}

// A name cut to 22 characters for the lane label (whole in the text list), on a UTF-8 boundary.
std::string LaneLabel(const std::string& name) {
  return HtmlEscape(name.size() <= 24 ? name : Shortened(name, 22));
}

std::string FillOf(LaneState state, const std::string& hatch_id) {
  switch (state) {
    case LaneState::kWritable:
      return "#c9302c";
    case LaneState::kNotWritable:
      return "#9cc3e6";
    case LaneState::kUnreachable:
      return "url(#" + hatch_id + ")";
    case LaneState::kNoData:
      break;
  }
  return "";
}

struct Axis {
  TimePoint from, to;
  double X(TimePoint t) const {
    const double span = std::max(1e-9, Seconds(from, to));
    return kLabelW + kPlotW * std::clamp(Seconds(from, t) / span, 0.0, 1.0);
  }
};

std::string Num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

void Bar(const Axis& axis, TimePoint from, TimePoint to, int y, const std::string& fill,
         std::ostream& out) {
  const double x = axis.X(from), w = std::max(1.5, axis.X(to) - x);
  out << "<rect x=\"" << Num(x) << "\" y=\"" << y + 3 << "\" width=\"" << Num(w) << "\" height=\""
      << kRowH - 8 << "\" fill=\"" << fill << "\"/>";
}

void Legend(const std::string& hatch_id, std::ostream& out) {
  const std::pair<const char*, std::string> keys[] = {{"writable", "#c9302c"},
                                                      {"not writable", "#9cc3e6"},
                                                      {"unreachable", "url(#" + hatch_id + ")"},
                                                      {"two or more writable", "#5a0a08"}};
  int x = kLabelW;
  for (const auto& [label, fill] : keys) {
    out << "<rect x=\"" << x << "\" y=\"4\" width=\"14\" height=\"12\" fill=\"" << fill
        << "\" stroke=\"#555\"/><text x=\"" << x + 18 << "\" y=\"14\" font-size=\"12\">" << label
        << "</text>";
    x += 40 + 7 * static_cast<int>(std::char_traits<char>::length(label));
  }
}

// Ticks every 1, 2, 5, 10 ... s from the onset, at most seven, each with its UTC time above
// its offset from the onset.
void TimeAxis(const Axis& axis, const IncidentSpan& span, int bottom, std::ostream& out) {
  static const int steps[] = {1,   2,   5,    10,   15,   30,    60,    120,   300,
                              600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400};
  const double total = Seconds(axis.from, axis.to);
  long step = steps[sizeof steps / sizeof steps[0] - 1];
  for (int s : steps) {
    if (total / s <= 6) {
      step = s;
      break;
    }
  }
  while (total / step > 12) step *= 2;  // a span of weeks (a long retention) still gets few
  const long first = static_cast<long>(std::ceil(Seconds(span.onset, axis.from) / step));
  for (long k = first; k * step <= Seconds(span.onset, axis.to) + 1e-6; ++k) {
    const TimePoint t = span.onset + seconds(k * step);
    const double x = axis.X(t);
    out << "<line x1=\"" << Num(x) << "\" y1=\"" << kTop - 4 << "\" x2=\"" << Num(x) << "\" y2=\""
        << bottom + 3 << "\" stroke=\"#ccc\"/><text x=\"" << Num(x) << "\" y=\"" << bottom + 16
        << "\" font-size=\"11\" text-anchor=\"middle\">" << Clock(t) << "</text><text x=\""
        << Num(x) << "\" y=\"" << bottom + 30 << "\" font-size=\"11\" text-anchor=\"middle\" "
        << "fill=\"#555\">" << Relative(k * step) << "</text>";
  }
  out << "<text x=\"4\" y=\"" << bottom + 16 << "\" font-size=\"11\">UTC</text><text x=\"4\" y=\""
      << bottom + 30 << "\" font-size=\"11\" fill=\"#555\">from onset</text>";
}

void Marker(const Axis& axis, TimePoint at, const char* label, const char* dash, int bottom,
            std::ostream& out) {
  const double x = axis.X(at);
  out << "<line x1=\"" << Num(x) << "\" y1=\"" << kTop - 10 << "\" x2=\"" << Num(x) << "\" y2=\""
      << bottom + 3 << "\" stroke=\"#000\" stroke-width=\"2\"" << dash << "/><text x=\""
      << Num(x + 3) << "\" y=\"" << kTop - 2 << "\" font-size=\"11\" font-weight=\"bold\">" << label
      << "</text>";
}

std::string Description(const std::string& cluster, const IncidentSpan& span,
                        const std::vector<std::pair<TimePoint, TimePoint>>& both) {
  double both_seconds = 0;
  for (const auto& [from, to] : both) both_seconds += Seconds(from, to);
  return "Incident in " + HtmlEscape(cluster) + " (" + HtmlEscape(span.verdict) +
         "): " + (span.onset_known ? "onset " : "first seen in the log ") + Clock(span.onset) +
         " UTC, " +
         (span.end ? "over at " + Clock(*span.end) + " UTC" : std::string("still open")) +
         "; two or more members writable for " + std::to_string(std::lround(both_seconds)) +
         " s in all. Chart from " + Clock(span.from) + " to " + Clock(span.to) + " UTC.";
}

void Svg(const std::string& cluster, const IncidentSpan& span, const std::vector<MemberLane>& lanes,
         const std::vector<std::pair<TimePoint, TimePoint>>& both, const std::string& id,
         std::ostream& out) {
  const Axis axis{span.from, span.to};
  const int bottom = kTop + kRowH * static_cast<int>(lanes.size() + 1);
  const int width = kLabelW + kPlotW + kRightPad, height = bottom + kAxisH;
  const std::string hatch = id + "-hatch";
  // The name and description come from <title> and <desc> (SVG-AAM); no ids, which HTML
  // validators that read <title> as HTML's would reject.
  out << "<svg role=\"img\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 "
      << width << " " << height
      << "\" xmlns=\"http://www.w3.org/2000/svg\"><title>Who was writable "
      << "when in " << HtmlEscape(cluster) << "</title><desc>" << Description(cluster, span, both)
      << "</desc><defs><pattern id=\"" << hatch
      << "\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      << "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eee\"/>"
      << "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#666\" stroke-width=\"3\"/>"
      << "</pattern></defs>";
  Legend(hatch, out);
  out << "<rect x=\"" << kLabelW << "\" y=\"" << kTop << "\" width=\"" << kPlotW << "\" height=\""
      << bottom - kTop << "\" fill=\"#f7f7f7\" stroke=\"#ccc\"/>";
  TimeAxis(axis, span, bottom, out);
  out << "<text x=\"4\" y=\"" << kTop + 15 << "\" font-size=\"12\" font-style=\"italic\">two or "
      << "more writable</text>";
  for (const auto& [from, to] : both) Bar(axis, from, to, kTop, "#5a0a08", out);
  int y = kTop + kRowH;
  for (const MemberLane& lane : lanes) {
    out << "<text x=\"4\" y=\"" << y + 15 << "\" font-size=\"12\">" << LaneLabel(lane.member)
        << "</text>";
    for (const LaneInterval& i : lane.intervals) {
      const std::string fill = FillOf(i.state, hatch);
      if (!fill.empty()) Bar(axis, i.from, i.to, y, fill, out);
    }
    y += kRowH;
  }
  Marker(axis, span.onset, span.onset_known ? "onset" : "first seen", "", bottom, out);
  if (span.end) Marker(axis, *span.end, "over", " stroke-dasharray=\"4 3\"", bottom, out);
  out << "</svg>";
}

// The same facts as text, for a screen reader and for anyone who cannot tell the colours apart.
void TextList(const IncidentSpan& span, const std::vector<MemberLane>& lanes,
              const std::vector<std::pair<TimePoint, TimePoint>>& both, size_t more,
              std::ostream& out) {
  out << "<ul class=\"vh\"><li>" << (span.onset_known ? "Onset " : "First seen in the log ")
      << Clock(span.onset) << " UTC (" << HtmlEscape(span.verdict) << ")"
      << (span.end ? ", over at " + Clock(*span.end) + " UTC" : std::string(", still open"))
      << ".</li><li>Two or more writable: ";
  if (both.empty()) out << "never in this span";
  for (size_t i = 0; i < both.size(); ++i) {
    out << (i ? "; " : "") << Clock(both[i].first) << " to " << Clock(both[i].second) << " ("
        << Duration(both[i].first, both[i].second) << ")";
  }
  out << ".</li>";
  for (const MemberLane& lane : lanes) {
    out << "<li>" << HtmlEscape(lane.member) << ": ";
    for (size_t i = 0; i < lane.intervals.size(); ++i) {
      const LaneInterval& v = lane.intervals[i];
      out << (i ? "; " : "") << HtmlEscape(v.state_name) << " " << Clock(v.from) << " to "
          << (v.to == span.to && !span.end ? std::string("now") : Clock(v.to)) << " ("
          << Duration(v.from, v.to) << ")";
    }
    out << ".</li>";
  }
  if (more > 0) out << "<li>" << more << " more members not drawn.</li>";
  out << "</ul>";
}

}  // namespace

std::string IncidentChartHtml(const std::string& cluster, const std::string& verdict,
                              const std::vector<ChartMember>& members,
                              const std::vector<IncidentEvent>& events, TimePoint now, int index) {
  const std::optional<IncidentSpan> span = FindIncident(events, verdict, now);
  if (!span) return "";
  const std::vector<MemberLane> lanes = BuildLanes(events, members, span->from, span->to);
  const size_t named = members.size() + OtherMembers(events, members).size();
  const auto both = DoubleWritable(lanes);
  std::ostringstream out;
  out << "<div class=\"incident\"><p><b>Incident timeline</b> <span class=\"muted\">(from the "
         "incident log; "
      << (span->end ? "over " + Clock(*span->end) + " UTC" : std::string("open")) << ")</span></p>";
  Svg(cluster, *span, lanes, both, "ic-" + std::to_string(index), out);
  TextList(*span, lanes, both, named > lanes.size() ? named - lanes.size() : 0, out);
  out << "</div>";
  return out.str();
}

}  // namespace sbd
