#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/async_probe.h"
#include "probes/probe.h"

namespace sbd {

/// Rows of repmgr.nodes read from one copy; a copy with more fails its read (the primary
/// cannot be told from a part of the table). The query asks for one more to know.
constexpr int kMaxRepmgrNodes = 100;
/// The longest node_name and conninfo read as such; longer ones reject their row.
constexpr size_t kMaxRepmgrNameBytes = 128;
constexpr size_t kMaxRepmgrConninfoBytes = 1024;

/// One row of repmgr.nodes, validated. `address` is host:port from its conninfo (libpq's own
/// parser), empty when it has none; the conninfo itself is never kept: it may hold a password.
struct RepmgrNode {
  std::int64_t node_id = 0;
  std::string node_name;
  std::string type;  ///< primary, standby or witness
  bool active = false;
  std::optional<std::int64_t> upstream_node_id;
  std::string address;
};

/// One member's copy of repmgr's record: its nodes and its count of successful promotions.
struct RepmgrCopy {
  std::vector<RepmgrNode> nodes;
  /// Successful `standby_promote` events in this copy's repmgr.events: the epoch.
  std::int64_t promotions = 0;
  std::vector<std::string> rejected;  ///< rows skipped, each saying why
};

/// The statement one copy is read with: the nodes (names and conninfo cut in SQL, one row past
/// the cap) and, on every row, the promotion count.
std::string RepmgrCopyQuery();

/// Pure: one copy from the answer to RepmgrCopyQuery(): 7 columns, each row checked (a row of
/// wrong types or NULLs is rejected, saying why); more than kMaxRepmgrNodes rows or another
/// shape is a failure.
std::variant<RepmgrCopy, ProbeFailure> ParseRepmgrCopy(const PGresult* result);

/// Pure: the record from every member's copy, in the order of `members`. The copies at the
/// highest promotion count are the newest word; the primary a strict majority of them names
/// (mapped to a member) is the holder, and that count the epoch. Every other copy is dissent.
/// Nothing readable, or no majority, is a failure.
std::variant<DcsView, ProbeFailure> FoldRepmgrCopies(
    const std::vector<MemberSpec>& members,
    const std::vector<std::variant<RepmgrCopy, ProbeFailure>>& copies);

/// repmgr's record of a PostgreSQL cluster: repmgr.nodes and repmgr.events read from every
/// member's copy of the metadata database at once, on the event loop with non-blocking libpq
/// (one connection per copy and read, each bounded by the deadline), folded by
/// FoldRepmgrCopies. Read-only. Start() on the loop thread, one at a time; the object may be
/// destroyed on any thread.
class RepmgrStore : public AsyncLockStore {
 public:
  RepmgrStore(std::vector<MemberSpec> members, std::string database, Millis timeout,
              EventLoop& loop = EventLoop::Shared());
  ~RepmgrStore() override;
  RepmgrStore(const RepmgrStore&) = delete;
  RepmgrStore& operator=(const RepmgrStore&) = delete;
  void Start(SteadyClock::time_point deadline, Done done) override;
  EventLoop& loop() override { return loop_; }

 private:
  struct Session;
  EventLoop& loop_;
  std::shared_ptr<Session> session_;
};

}  // namespace sbd
