#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "detector/output/incident_log.h"

namespace sbd {

/// An incident that ended this recently is still charted on the status page.
constexpr std::chrono::minutes kRecentIncident{15};

/// What a member was during one stretch of an incident chart.
enum class LaneState { kNoData, kWritable, kNotWritable, kUnreachable };

/// The lane state of a state name from the incident log ("writable", "standby", "read_only",
/// "unreadable", "removed") or from /status ("replica", "read-only", "unknown (timeout)", "not
/// probed"); any other name is kNoData. Pure.
LaneState LaneStateOf(const std::string& state);

/// One stretch [from, to) of one state; `state_name` is the name the log or /status gave it
/// ("no record" where neither says anything). Plain value type.
struct LaneInterval {
  WallClock::time_point from;
  WallClock::time_point to;
  LaneState state = LaneState::kNoData;
  std::string state_name;
};

/// One member's states over the chart's span, oldest first, adjacent and non-overlapping.
/// Plain value type.
struct MemberLane {
  std::string member;
  std::vector<LaneInterval> intervals;
};

/// The incident a chart shows and the span of its time axis. Plain value type.
struct IncidentSpan {
  WallClock::time_point onset;  ///< when the verdict left healthy (or the log's first event)
  bool onset_known = true;      ///< false when the log starts inside the incident
  std::optional<WallClock::time_point> end;  ///< when it became healthy again; none while open
  std::string verdict;                       ///< the verdict it started with
  WallClock::time_point from;                ///< the axis: a lead before the onset ...
  WallClock::time_point to;                  ///< ... to now, or a little after the end
};

/// A member's name and its state now, as /status gives them.
struct ChartMember {
  std::string name;
  std::string state;
};

/// The incident to chart from one cluster's events (in any order): the one open now (`verdict`
/// neither healthy nor pending) or the last one that ended at most `recent` before `now`;
/// nullopt with neither, or with no event. Never throws on the events' fields. Pure.
std::optional<IncidentSpan> FindIncident(std::vector<IncidentEvent> events,
                                         const std::string& verdict, WallClock::time_point now,
                                         std::chrono::seconds recent = kRecentIncident);

/// One lane per member over [from, to): `members` in their order, then any other member the
/// events name, by name (at most kMaxLanes in all). States come from cluster_added,
/// member_state_changed and cluster_removed events of one cluster, in any order; before a
/// member's first change its `from` state holds back to the log's first event; a member with
/// no event at all kept its state now over the whole log. Pure.
std::vector<MemberLane> BuildLanes(std::vector<IncidentEvent> events,
                                   const std::vector<ChartMember>& members,
                                   WallClock::time_point from, WallClock::time_point to);

/// At most this many lanes per chart (the text list says how many more there were).
constexpr size_t kMaxLanes = 40;

/// The stretches in which two or more lanes were writable at once, oldest first. Pure.
std::vector<std::pair<WallClock::time_point, WallClock::time_point>> DoubleWritable(
    const std::vector<MemberLane>& lanes);

/// The status page's chart of one cluster's incident: an inline SVG with one lane per member
/// (writable, not writable, unreachable), a lane for two writable at once, the onset marked and
/// the axis in UTC and seconds from the onset, with a <title>, a <desc> and a visually hidden
/// text list of every interval. "" when FindIncident finds nothing to chart. `index` makes its
/// element ids unique on the page. Every name is escaped. Pure.
std::string IncidentChartHtml(const std::string& cluster, const std::string& verdict,
                              const std::vector<ChartMember>& members,
                              const std::vector<IncidentEvent>& events, WallClock::time_point now,
                              int index);

}  // namespace sbd
