#include "detector/engine/write_window.h"

#include <algorithm>

namespace sbd {
namespace {

struct Holder {
  const MemberHistory* history;
  const PostgresReading* reading;  ///< PostgreSQL's reading; null for other kinds
  const RedisReading* redis;       ///< Redis's reading; null for other kinds
};

// The writable members of the lineage in this round, in member order (lineages a Redis
// promotion links are one).
std::vector<Holder> CurrentHolders(const ClusterSpec& spec, const ClusterHistory& history) {
  LineageLinks links;
  for (const auto& [name, member] : history.members) {
    if (member.last_claim)
      links.Link(member.last_claim->lineage, member.last_claim->previous_lineage);
  }
  std::vector<Holder> holders;
  for (const auto& member : spec.members) {
    auto it = history.members.find(member.name);
    if (it == history.members.end() || !it->second.last || !it->second.last->seen_writable()) {
      continue;
    }
    const std::optional<Claim> claim = it->second.last->claim();
    if (claim && links.Same(claim->lineage, history.lineage)) {
      holders.push_back({&it->second, it->second.last->reading(), it->second.last->redis()});
    }
  }
  return holders;
}

// Redis: the promoted master (the one that continued from another replication id still
// writable here) gives the fork offset; every master's bytes since it come from its offset.
// Redis sets second_repl_offset to the stream's offset + 1 at the promotion.
void RedisWindow(const std::vector<Holder>& holders, WriteWindow& window) {
  window.written = "replication stream";
  const Holder* promoted = nullptr;
  for (const auto& h : holders) {
    if (h.redis != nullptr && h.redis->second_repl_offset > 0 && !h.redis->master_replid2.empty())
      promoted = &h;
  }
  if (promoted == nullptr) {
    window.fork_unknown_reason =
        "fork point unknown: no writable master says which replication id it continued from";
  } else {
    window.fork_repl_offset = promoted->redis->second_repl_offset - 1;
  }
}

void CountRedisSinceFork(const Holder& holder, const WriteWindow& window, HolderWrites& writes) {
  if (!window.fork_repl_offset) {
    writes.unknown_reason = window.fork_unknown_reason;
  } else if (holder.redis->master_repl_offset < *window.fork_repl_offset) {
    writes.unknown_reason = "its replication offset " +
                            std::to_string(holder.redis->master_repl_offset) +
                            " is behind the fork offset";
  } else {
    writes.wal_bytes_since_fork =
        static_cast<std::uint64_t>(holder.redis->master_repl_offset - *window.fork_repl_offset);
  }
}

// The holder on the newest timeline (the first such, in member order).
const Holder* Newest(const std::vector<Holder>& holders) {
  const Holder* newest = nullptr;
  for (const auto& h : holders) {
    if (h.reading == nullptr) continue;
    if (newest == nullptr || h.reading->timeline > newest->reading->timeline) newest = &h;
  }
  return newest;
}

// Where the lineage left `timeline` on its way to the newest one, or nullptr.
const TimelineSwitch* SwitchFrom(const std::vector<TimelineSwitch>& history,
                                 std::int64_t timeline) {
  for (const auto& s : history) {
    if (s.parent_timeline == timeline) return &s;
  }
  return nullptr;
}

// The fork point from the newest holder's history, or the reason it is unknown.
void FindFork(const std::vector<Holder>& holders, const Holder& newest, WriteWindow& window) {
  const PostgresReading& r = *newest.reading;
  const bool one_timeline = std::all_of(holders.begin(), holders.end(), [&](const Holder& h) {
    return h.reading == nullptr || h.reading->timeline == r.timeline;
  });
  if (holders.size() >= 2 && one_timeline) {
    window.fork_unknown_reason = "fork point unknown: every writable member is on timeline " +
                                 std::to_string(r.timeline) + ", so no timeline switch parts them";
  } else if (r.timeline <= 1) {
    window.fork_unknown_reason = "fork point unknown: the newest writable member is on timeline 1";
  } else if (r.timeline_history.empty()) {
    window.fork_unknown_reason =
        "fork point unknown: " +
        (r.timeline_history_error.empty() ? std::string("not read yet") : r.timeline_history_error);
  } else {
    window.fork_lsn = r.timeline_history.back().switch_lsn_text;
    window.fork_timeline = r.timeline;
  }
}

// What `holder` wrote past the switch its timeline took towards the newest one.
void CountSinceFork(const Holder& holder, const Holder& newest, const WriteWindow& window,
                    HolderWrites& writes) {
  if (window.fork_lsn.empty()) {
    writes.unknown_reason = window.fork_unknown_reason;
    return;
  }
  const auto& history = newest.reading->timeline_history;
  const std::int64_t timeline = holder.reading->timeline;
  const TimelineSwitch* from =
      timeline == window.fork_timeline ? &history.back() : SwitchFrom(history, timeline);
  if (from == nullptr) {
    writes.unknown_reason = "timeline " + std::to_string(timeline) +
                            " is not an ancestor of timeline " +
                            std::to_string(window.fork_timeline);
  } else if (holder.reading->wal_bytes < from->switch_lsn) {
    writes.unknown_reason = "its WAL position " + holder.reading->wal_lsn +
                            " is behind the switch point " + from->switch_lsn_text;
  } else {
    writes.wal_bytes_since_fork = holder.reading->wal_bytes - from->switch_lsn;
  }
}

}  // namespace

std::optional<WriteWindow> AssessWriteWindow(const ClusterSpec& spec, const ClusterHistory& history,
                                             bool incident) {
  if (!incident) return std::nullopt;
  const std::vector<Holder> holders = CurrentHolders(spec, history);
  WriteWindow window;
  if (holders.empty()) {
    window.fork_unknown_reason = "fork point unknown: no member of the lineage is writable now";
    return window;
  }
  const Holder* newest = Newest(holders);
  const bool redis = std::any_of(holders.begin(), holders.end(),
                                 [](const Holder& h) { return h.redis != nullptr; });
  if (newest != nullptr) {
    FindFork(holders, *newest, window);
  } else if (redis) {
    RedisWindow(holders, window);
  } else {
    window.written = "data";
    window.fork_unknown_reason = "no write position: the holders' claims carry none";
  }
  std::optional<WallClock::time_point> both_since;
  std::optional<WallClock::time_point> both_until;
  for (const auto& holder : holders) {
    HolderWrites writes;
    writes.member = holder.history->last->member;
    writes.first_writable = holder.history->writable_since;
    writes.last_writable = holder.history->last_seen_writable;
    if (holder.reading != nullptr && newest != nullptr) {
      CountSinceFork(holder, *newest, window, writes);
    } else if (holder.redis != nullptr) {
      CountRedisSinceFork(holder, window, writes);
    } else {
      writes.unknown_reason = window.fork_unknown_reason;
    }
    if (writes.first_writable && writes.last_writable) {
      both_since = std::max(both_since.value_or(*writes.first_writable), *writes.first_writable);
      both_until = std::min(both_until.value_or(*writes.last_writable), *writes.last_writable);
    }
    window.holders.push_back(std::move(writes));
  }
  if (holders.size() >= 2 && both_since && both_until) {
    window.double_write_seconds =
        std::max(0.0, std::chrono::duration<double>(*both_until - *both_since).count());
  }
  return window;
}

}  // namespace sbd
