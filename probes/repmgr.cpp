#include "probes/repmgr.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>

#include "detector/common/logfmt.h"
#include "probes/discovered_address.h"

namespace sbd {
namespace {

std::optional<std::string> Cell(const PGresult* result, int row, int column) {
  if (PQgetisnull(result, row, column)) return std::nullopt;
  return std::string(PQgetvalue(result, row, column), PQgetlength(result, row, column));
}

std::optional<std::int64_t> Integer(const std::optional<std::string>& text) {
  if (!text || text->empty() || text->size() > 19) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text->c_str(), &end, 10);
  if (errno != 0 || end != text->c_str() + text->size()) return std::nullopt;
  return value;
}

// host:port of a conninfo's first host, as the config shows a member's address; empty when the
// conninfo names none or libpq cannot parse it.
std::string AddressOf(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  PQfreemem(error);
  if (options == nullptr) return "";
  std::string host, hostaddr, port;
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const std::string keyword = o->keyword;
    if (keyword == "host") host = o->val;
    if (keyword == "hostaddr") hostaddr = o->val;
    if (keyword == "port") port = o->val;
  }
  PQconninfoFree(options);
  if (host.empty()) host = hostaddr;
  host = host.substr(0, host.find(','));
  port = port.substr(0, port.find(','));
  if (host.empty()) return "";
  if (host[0] != '/' && host.find(':') != std::string::npos) host = "[" + host + "]";
  return host + ":" + (port.empty() ? "5432" : port);
}

// One row, or why it is skipped (`why` set).
std::optional<RepmgrNode> NodeOf(const PGresult* result, int row, std::string& why) {
  auto skip = [&](std::string reason) {
    why = std::move(reason);
    return std::optional<RepmgrNode>();
  };
  RepmgrNode node;
  const auto id = Integer(Cell(result, row, 0));
  if (!id || *id <= 0 || *id > 0x7FFFFFFF) return skip("node_id is not a positive integer");
  node.node_id = *id;
  const auto name = Cell(result, row, 1);
  if (!name || name->empty() || name->size() > kMaxRepmgrNameBytes) {
    return skip("node_name is empty, NULL or longer than " + std::to_string(kMaxRepmgrNameBytes) +
                " bytes");
  }
  node.node_name = *name;
  const auto type = Cell(result, row, 2);
  if (!type || (*type != "primary" && *type != "standby" && *type != "witness")) {
    return skip("type is " + (type ? ShownToken(*type) : std::string("NULL")));
  }
  node.type = *type;
  const auto active = Cell(result, row, 3);
  if (!active || (*active != "t" && *active != "f")) return skip("active is not a boolean");
  node.active = *active == "t";
  if (const auto upstream = Cell(result, row, 4)) {
    node.upstream_node_id = Integer(upstream);
    if (!node.upstream_node_id) return skip("upstream_node_id is not an integer");
  }
  if (const auto conninfo = Cell(result, row, 5)) {
    if (conninfo->size() > kMaxRepmgrConninfoBytes) {
      return skip("conninfo longer than " + std::to_string(kMaxRepmgrConninfoBytes) + " bytes");
    }
    node.address = AddressOf(*conninfo);
  }
  return node;
}

// The member a node stands for: the one whose address is the node's conninfo host:port (the
// server repmgr itself reaches), else the one of the node's name; else the name itself.
std::string MemberOf(const RepmgrNode& node, const std::vector<MemberSpec>& members) {
  if (!node.address.empty()) {
    for (const MemberSpec& member : members) {
      if (member.address == node.address) return member.name;
    }
  }
  for (const MemberSpec& member : members) {
    if (member.name == node.node_name) return member.name;
  }
  return ShownToken(node.node_name);
}

// The primary a copy names (a member's name), empty when it names none or several.
std::string PrimaryOf(const RepmgrCopy& copy, const std::vector<MemberSpec>& members,
                      std::string* why) {
  std::string primary;
  int count = 0;
  for (const RepmgrNode& node : copy.nodes) {
    if (node.type != "primary" || !node.active) continue;
    ++count;
    primary = MemberOf(node, members);
  }
  if (count > 1) {
    *why = std::to_string(count) + " active primaries";
    return "";
  }
  if (count == 0) *why = "no active primary";
  return primary;
}

// The promotion count each copy is dated by (-1 for an unreadable one). A witness's copy is
// dated by the newest member copy that names the same primary; -1 (behind every count) when none
// does.
std::vector<std::int64_t> PromotionCounts(
    const std::vector<MemberSpec>& members,
    const std::vector<std::variant<RepmgrCopy, ProbeFailure>>& copies,
    const std::vector<std::string>& claims) {
  std::vector<std::int64_t> counts(claims.size(), -1);
  for (size_t i = 0; i < claims.size() && i < members.size(); ++i) {
    const auto* copy = std::get_if<RepmgrCopy>(&copies[i]);
    if (copy == nullptr) continue;
    if (!copy->witness) {
      counts[i] = copy->promotions;
      continue;
    }
    for (size_t j = 0; j < claims.size() && j < members.size(); ++j) {
      const auto* other = std::get_if<RepmgrCopy>(&copies[j]);
      if (other && !other->witness && claims[j] == claims[i]) {
        counts[i] = std::max(counts[i], other->promotions);
      }
    }
  }
  return counts;
}

// The primary more than half the voters name; empty when none does (or the most name none).
std::string MajorityOf(const std::map<std::string, int>& votes, int voters) {
  for (const auto& [claim, count] : votes) {
    if (2 * count > voters && claim[0] != '(') return claim;
  }
  return "";
}

// Why a copy outside the majority (or behind the newest promotion count) did not vote with it.
std::string CopyDissent(const std::string& who, const RepmgrCopy& copy, const std::string& claim,
                        std::int64_t count) {
  const std::string names = "copy of " + who + " names " + claim + " primary";
  if (!copy.witness) return names + " at promotion count " + std::to_string(copy.promotions);
  if (count < 0) return names + ", as no member's copy does";
  return names + ", as member copies at promotion count " + std::to_string(count) + " do";
}

}  // namespace

std::string RepmgrCopyQuery() {
  return "SELECT n.node_id::bigint, left(n.node_name, " + std::to_string(kMaxRepmgrNameBytes + 1) +
         "), n.type::text, n.active, " + "n.upstream_node_id::bigint, left(n.conninfo, " +
         std::to_string(kMaxRepmgrConninfoBytes + 1) +
         "), (SELECT count(*) FROM repmgr.events e WHERE e.event = 'standby_promote' AND "
         "e.successful), pg_is_in_recovery() FROM repmgr.nodes n ORDER BY n.node_id LIMIT " +
         std::to_string(kMaxRepmgrNodes + 1);
}

std::variant<RepmgrCopy, ProbeFailure> ParseRepmgrCopy(const PGresult* result) {
  if (PQnfields(result) != 8) {
    return ProbeFailure{ProbeFailureReason::kProtocol, "unexpected result shape"};
  }
  const int rows = PQntuples(result);
  if (rows > kMaxRepmgrNodes) {
    return ProbeFailure{ProbeFailureReason::kProtocol,
                        "more than " + std::to_string(kMaxRepmgrNodes) +
                            " rows in repmgr.nodes: the primary cannot be told from a part"};
  }
  RepmgrCopy copy;
  for (int row = 0; row < rows; ++row) {
    const auto promotions = Integer(Cell(result, row, 6));
    if (!promotions || *promotions < 0 || (row > 0 && *promotions != copy.promotions)) {
      return ProbeFailure{ProbeFailureReason::kProtocol, "unexpected promotion count"};
    }
    copy.promotions = *promotions;
    if (const auto recovery = Cell(result, row, 7)) {
      if ((*recovery != "t" && *recovery != "f") ||
          (copy.in_recovery && *copy.in_recovery != (*recovery == "t"))) {
        return ProbeFailure{ProbeFailureReason::kProtocol, "unexpected pg_is_in_recovery value"};
      }
      copy.in_recovery = *recovery == "t";
    }
    std::string why;
    if (auto node = NodeOf(result, row, why)) {
      copy.nodes.push_back(std::move(*node));
    } else {
      copy.rejected.push_back("repmgr.nodes row " + std::to_string(row + 1) + ": " + why);
    }
  }
  return copy;
}

std::variant<LockRecord, ProbeFailure> FoldRepmgrCopies(
    const std::vector<MemberSpec>& members,
    const std::vector<std::variant<RepmgrCopy, ProbeFailure>>& copies) {
  // The epoch is the count of successful promotions: each `repmgr standby promote` (by hand,
  // from repmgrd's promote_command, or inside a switchover) adds one event, and repmgr never
  // deletes events, so a copy's count only goes up. Event timestamps are each node's clock,
  // which may go back; node ids and the nodes table change without a promotion. A copy with
  // fewer promotions than another has not seen the latest one (it is, or replicates from, a node
  // the promotion did not reach: repmgr does not fence), so only the newest copies vote.
  std::int64_t newest = -1;
  for (const auto& copy : copies) {
    const auto* read = std::get_if<RepmgrCopy>(&copy);
    if (read && !read->witness) newest = std::max(newest, read->promotions);
  }
  LockRecord record;
  record.lease_id = "0";
  std::vector<std::string> claims(copies.size());
  std::map<std::string, int> votes;
  int voters = 0;
  std::string failures;
  for (size_t i = 0; i < copies.size() && i < members.size(); ++i) {
    const std::string& who = members[i].name;
    if (const auto* failure = std::get_if<ProbeFailure>(&copies[i])) {
      record.dissent.push_back("copy of " + who + ": unreadable (" + ReasonName(failure->reason) +
                               "): " + failure->message);
      failures += (failures.empty() ? "" : "; ") + who + ": " + failure->message;
      continue;
    }
    const RepmgrCopy& copy = std::get<RepmgrCopy>(copies[i]);
    for (const std::string& why : copy.rejected) record.rejected.push_back(who + ": " + why);
    if (!record.endpoint.empty()) record.endpoint += ",";
    record.endpoint += who;
    std::string why;
    claims[i] = PrimaryOf(copy, members, &why);
    if (claims[i].empty()) claims[i] = "(" + why + ")";
  }
  const std::vector<std::int64_t> counts = PromotionCounts(members, copies, claims);
  for (size_t i = 0; i < claims.size() && i < members.size(); ++i) {
    if (!std::holds_alternative<RepmgrCopy>(copies[i]) || counts[i] < 0 || counts[i] != newest) {
      continue;
    }
    ++voters;
    ++votes[claims[i]];
  }
  if (record.endpoint.empty()) {
    return ProbeFailure{copies.empty() ? ProbeFailureReason::kConfig
                                       : std::get<ProbeFailure>(copies.front()).reason,
                        "no member's repmgr record was readable: " + failures};
  }
  const std::string majority = MajorityOf(votes, voters);
  for (size_t i = 0; i < copies.size() && i < members.size(); ++i) {
    const auto* copy = std::get_if<RepmgrCopy>(&copies[i]);
    if (copy == nullptr || (claims[i] == majority && counts[i] == newest)) continue;
    record.dissent.push_back(CopyDissent(members[i].name, *copy, claims[i], counts[i]));
  }
  if (majority.empty()) {
    std::string said;
    for (size_t i = 0; i < record.dissent.size() && i < 5; ++i) said += "; " + record.dissent[i];
    return ProbeFailure{ProbeFailureReason::kProtocol,
                        "no majority of the " + std::to_string(voters) +
                            " copies at promotion count " + std::to_string(newest) +
                            " names one primary" + said};
  }
  record.holder = majority;
  record.mod_revision = newest;
  return record;
}

RepmgrDiscovery DiscoverRepmgrNodes(
    const std::vector<MemberSpec>& configured, const std::vector<MemberSpec>& readers,
    const std::vector<std::variant<RepmgrCopy, ProbeFailure>>& copies,
    const DiscoverySpec& discovery) {
  RepmgrDiscovery found;
  auto known = [](const std::vector<MemberSpec>& members, const RepmgrNode& node) {
    return std::any_of(members.begin(), members.end(), [&](const MemberSpec& m) {
      return m.name == node.node_name || (!node.address.empty() && m.address == node.address);
    });
  };
  std::vector<MemberSpec> seen;  // one node per name and per address
  for (size_t i = 0; i < copies.size() && i < readers.size(); ++i) {
    const auto* copy = std::get_if<RepmgrCopy>(&copies[i]);
    if (copy == nullptr) continue;
    for (const RepmgrNode& node : copy->nodes) {
      if (node.type == "witness" || known(configured, node) || known(seen, node)) continue;
      const HostPort at = SplitHostPort(node.address);
      const DiscoveredAddress address =
          node.address.empty()
              ? DiscoveredAddress{"", ShownToken(node.node_name) +
                                          ": conninfo names no host: not discovered"}
              : DiscoverableAddress(node.node_name, at.host, at.port);
      MemberSpec placeholder;
      placeholder.name = node.node_name;
      placeholder.address = node.address;
      seen.push_back(placeholder);
      if (address.conn_url.empty()) {
        found.rejected.push_back("repmgr.nodes node " + std::to_string(node.node_id) + " " +
                                 address.why);
        continue;
      }
      found.registered.push_back(DcsMember{node.node_name, address.conn_url, "", node.type, ""});
      if (found.copies.size() >= static_cast<size_t>(discovery.max_members)) continue;
      MemberSpec reader = MemberAt(node.node_name, at, discovery.dsn, discovery.password_file,
                                   discovery.password_env);
      reader.address = node.address;  // as the record spells it, which MemberOf matches
      reader.discovered = true;
      found.copies.push_back(std::move(reader));
    }
  }
  return found;
}

std::optional<ProbeFailure> RepmgrRecordLag(
    const std::vector<MemberSpec>& members,
    const std::vector<std::variant<RepmgrCopy, ProbeFailure>>& copies, RepmgrLagClock& clock,
    WallClock::time_point now) {
  std::map<std::string, WallClock::time_point> seen;
  std::optional<ProbeFailure> held;
  for (size_t i = 0; i < copies.size() && i < members.size(); ++i) {
    const auto* copy = std::get_if<RepmgrCopy>(&copies[i]);
    if (copy == nullptr || !copy->in_recovery || *copy->in_recovery) continue;
    const std::string& who = members[i].name;
    std::string why;
    const std::string names = PrimaryOf(*copy, members, &why);
    if (names == who) continue;
    const auto it = clock.since.find(who);
    const WallClock::time_point since = it == clock.since.end() ? now : it->second;
    seen[who] = since;
    const auto lag = std::chrono::duration_cast<std::chrono::milliseconds>(now - since);
    if (lag > kRepmgrRecordLagBound || held) continue;
    held = ProbeFailure{
        ProbeFailureReason::kProtocol,
        who + " is out of recovery but its own copy of repmgr's record names " +
            (names.empty() ? "(" + why + ")" : names) +
            " primary: repmgr writes a promotion after the server leaves recovery, so the record "
            "is not read until it names " +
            who + " (" + std::to_string(lag.count()) + " ms of the " +
            std::to_string(kRepmgrRecordLagBound.count()) + " ms bound)"};
  }
  clock.since = std::move(seen);
  return held;
}

}  // namespace sbd
