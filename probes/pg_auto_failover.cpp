#include "probes/pg_auto_failover.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "probes/discovered_address.h"

namespace sbd {
namespace {

// Cells of a MonitorRow.
enum Cell {
  kNewestEvent,
  kNodeId,
  kNodeName,
  kNodeHost,
  kNodePort,
  kGoal,
  kReported,
  kLsn,
  kCells
};

constexpr std::size_t kMaxTextBytes = 255;

// A cell fit to show: printable ASCII, not empty, at most kMaxTextBytes.
bool Printable(const std::string& text) {
  return !text.empty() && text.size() <= kMaxTextBytes &&
         std::all_of(text.begin(), text.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// A hostile cell's text, shown only when harmless.
std::string Shown(const std::optional<std::string>& cell) {
  if (!cell) return "NULL";
  if (cell->size() <= 64 && Printable(*cell)) return "'" + *cell + "'";
  return "a value of " + std::to_string(cell->size()) + " bytes (not shown)";
}

std::optional<std::int64_t> Integer(const std::optional<std::string>& cell) {
  if (!cell || cell->empty() || cell->size() > 19) return std::nullopt;
  if (!std::all_of(cell->begin(), cell->end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  errno = 0;
  const long long value = std::strtoll(cell->c_str(), nullptr, 10);
  if (errno != 0) return std::nullopt;
  return value;
}

struct MonitorNode {
  std::string name;  // the member's name, else the nodename
  std::string nodename;
  std::string goal;
  std::string reported;
  std::string host;
  std::string port;
  bool configured = false;  // named by a member of the config
};

// One row as a node, or why it is skipped.
std::variant<MonitorNode, std::string> ReadNode(const MonitorRow& row,
                                                const std::vector<MemberSpec>& members) {
  const std::optional<std::int64_t> id = Integer(row[kNodeId]);
  if (!id || *id <= 0) return "a node's nodeid is not a positive integer: " + Shown(row[kNodeId]);
  const std::string at = "node " + std::to_string(*id) + ": ";
  if (!row[kNodeName] || !Printable(*row[kNodeName])) {
    return at + "nodename is not a printable name: " + Shown(row[kNodeName]);
  }
  if (!row[kNodeHost] || !Printable(*row[kNodeHost])) {
    return at + "nodehost is not a printable name: " + Shown(row[kNodeHost]);
  }
  const std::optional<std::int64_t> port = Integer(row[kNodePort]);
  if (!port || *port < 1 || *port > 65535)
    return at + "nodeport is not a port: " + Shown(row[kNodePort]);
  for (Cell cell : {kGoal, kReported}) {
    if (!row[cell] || !KnownState(*row[cell])) {
      return at + (cell == kGoal ? "goalstate" : "reportedstate") +
             " is not a pg_auto_failover 2.0 state: " + Shown(row[cell]);
    }
  }
  MonitorNode node{*row[kNodeName], *row[kNodeName], *row[kGoal],
                   *row[kReported], *row[kNodeHost], std::to_string(*port)};
  const std::string address = *row[kNodeHost] + ":" + std::to_string(*port);
  auto named = std::find_if(members.begin(), members.end(),
                            [&](const MemberSpec& m) { return m.name == node.nodename; });
  if (named == members.end()) {
    named = std::find_if(members.begin(), members.end(),
                         [&](const MemberSpec& m) { return m.address == address; });
  }
  if (named != members.end()) node.name = named->name;
  node.configured = named != members.end();
  return node;
}

// The holder among `nodes`: the one node whose goal passes `test`; empty for none or several
// (then `rejected` says which).
std::string OneNode(const std::vector<MonitorNode>& nodes, bool (*test)(const std::string&),
                    const char* what, LockRecord& view) {
  std::vector<const MonitorNode*> found;
  for (const MonitorNode& node : nodes) {
    if (test(node.goal)) found.push_back(&node);
  }
  if (found.size() == 1) return found.front()->name;
  if (found.size() > 1) {
    std::string names;
    for (const MonitorNode* node : found) names += (names.empty() ? "" : ", ") + node->name;
    view.rejected.push_back("several nodes have a " + std::string(what) + " goal (" + names +
                            "): no holder named");
  }
  return "";
}

bool PromotionGoal(const std::string& state) {
  return state == "prepare_promotion" || state == "stop_replication";
}

}  // namespace

bool PrimaryLikeState(const std::string& state) {
  return state == "single" || state == "wait_primary" || state == "primary" ||
         state == "join_primary" || state == "apply_settings";
}

bool HandoverState(const std::string& state) {
  return state == "draining" || state == "demote_timeout" || state == "prepare_maintenance" ||
         PromotionGoal(state) || state == "report_lsn" || state == "fast_forward";
}

bool KnownState(const std::string& state) {
  static const char* const kStates[] = {"unknown",
                                        "init",
                                        "single",
                                        "wait_primary",
                                        "primary",
                                        "draining",
                                        "demote_timeout",
                                        "demoted",
                                        "catchingup",
                                        "secondary",
                                        "prepare_promotion",
                                        "stop_replication",
                                        "wait_standby",
                                        "maintenance",
                                        "join_primary",
                                        "apply_settings",
                                        "prepare_maintenance",
                                        "wait_maintenance",
                                        "report_lsn",
                                        "fast_forward",
                                        "join_secondary",
                                        "dropped"};
  return std::any_of(std::begin(kStates), std::end(kStates),
                     [&](const char* known) { return state == known; });
}

const char* MonitorNodesQuery() {
  // Every cell as text: the fold checks each one's form itself. LIMIT one above the cap, so
  // that a group past it is seen to be.
  return "SELECT e.newest::text, n.nodeid::text, n.nodename, n.nodehost, n.nodeport::text, "
         "n.goalstate::text, n.reportedstate::text, n.reportedlsn::text "
         "FROM (SELECT max(eventid) AS newest FROM pgautofailover.event WHERE formationid = $1) e "
         "LEFT JOIN LATERAL (SELECT nodeid, nodename, nodehost, nodeport, goalstate, "
         "reportedstate, reportedlsn FROM pgautofailover.node "
         "WHERE formationid = $1 AND groupid = $2::int ORDER BY nodeid LIMIT 1001) n ON true";
}

std::variant<LockRecord, ProbeFailure> FoldMonitorNodes(const std::vector<MonitorRow>& rows,
                                                        const std::vector<MemberSpec>& members,
                                                        const PgAutoFailoverSpec& spec,
                                                        bool discover) {
  const std::string group = "formation " + spec.formation + " group " + std::to_string(spec.group);
  if (rows.size() > kMaxMonitorNodes) {
    return ProbeFailure{ProbeFailureReason::kProtocol,
                        "more than " + std::to_string(kMaxMonitorNodes) + " nodes in " + group +
                            ": the holder cannot be told"};
  }
  LockRecord view;
  std::vector<MonitorNode> nodes;
  for (const MonitorRow& row : rows) {
    if (row.size() != kCells) {
      return ProbeFailure{
          ProbeFailureReason::kProtocol,
          "the monitor's answer has " + std::to_string(row.size()) + " columns, not 8"};
    }
    if (row[kNewestEvent]) {
      const std::optional<std::int64_t> event = Integer(row[kNewestEvent]);
      if (event) view.mod_revision = std::max(view.mod_revision, *event);
      if (!event)
        view.rejected.push_back("the newest event id is not a number: " + Shown(row[kNewestEvent]));
    }
    if (std::all_of(row.begin() + kNodeId, row.end(), [](const auto& c) { return !c; })) {
      continue;  // the group has no node: the LEFT JOIN's empty side
    }
    auto node = ReadNode(row, members);
    if (auto* why = std::get_if<std::string>(&node)) {
      view.rejected.push_back(*why);
      continue;
    }
    MonitorNode& read = std::get<MonitorNode>(node);
    DcsMember member{read.name, "", "", read.goal, read.reported};
    if (discover && !read.configured) {
      DiscoveredAddress found = DiscoverableAddress(read.name, read.host, read.port);
      member.conn_url = std::move(found.conn_url);
      if (!found.why.empty()) view.rejected.push_back("node " + found.why);
    }
    view.members.push_back(std::move(member));
    if (HandoverState(read.goal) || HandoverState(read.reported) ||
        PrimaryLikeState(read.goal) != PrimaryLikeState(read.reported)) {
      view.handover_in_progress = true;
    }
    if (PrimaryLikeState(read.reported) && !PrimaryLikeState(read.goal)) {
      view.dissent.push_back(read.name + " reports " + read.reported +
                             " while the monitor's goal for it is " + read.goal);
    }
    nodes.push_back(std::move(read));
  }
  const bool any_primary = std::any_of(nodes.begin(), nodes.end(), [](const MonitorNode& node) {
    return PrimaryLikeState(node.goal);
  });
  view.holder = OneNode(nodes, PrimaryLikeState, "primary-like", view);
  if (!any_primary) {
    view.holder = OneNode(nodes, PromotionGoal, "promotion", view);
  }
  return view;
}

void TrackMonitorHandover(LockRecord& view, MonitorHandoverClock& clock,
                          WallClock::time_point now) {
  if (!view.holder.empty() && view.holder != clock.holder) {
    if (!clock.holder.empty()) {
      clock.previous_holder = clock.holder;
      clock.holder_changed_at = now;
    }
    clock.holder = view.holder;
  }
  view.previous_holder = clock.previous_holder;
  view.holder_changed_at = clock.holder_changed_at;
  view.handover_bound = kPgAutoFailoverHandoverBound;
  if (!view.handover_in_progress) {
    clock.handover_since.reset();
    return;
  }
  if (!clock.handover_since) clock.handover_since = now;
  const auto reported =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - *clock.handover_since);
  if (reported > kPgAutoFailoverHandoverBound) {
    view.handover_in_progress = false;
    view.dissent.push_back("the monitor has reported a transition for " +
                           std::to_string(reported.count()) + " ms, past the " +
                           std::to_string(kPgAutoFailoverHandoverBound.count()) +
                           " ms bound: no longer a handover");
  }
}

std::string PgAutoFailoverRecord(const PgAutoFailoverSpec& spec) {
  return "pg_auto_failover monitor " + spec.monitor.address + ", formation " + spec.formation +
         " group " + std::to_string(spec.group);
}

}  // namespace sbd
