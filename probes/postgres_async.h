#pragma once

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <variant>

#include "detector/config/config.h"
#include "probes/async_probe.h"

namespace sbd {

/// Turns the result of PostgresReadingQuery() into a reading: exactly one row of 16
/// columns, in the types the query yields from a real server. Anything else is a kProtocol
/// failure (and `*drop_connection` is set: something else answers on this port). Pure.
std::variant<PostgresReading, ProbeFailure> ParseReadingResult(const PGresult* result,
                                                               bool* drop_connection);

/// Probes one PostgreSQL member on an EventLoop with non-blocking libpq, over a persistent
/// session built from PostgresConninfo (the member's DSN, TLS and auth).
/// One statement per reading. A late answer does not cost the connection: the round reads a
/// timeout and the next reading is sent once the answer is in. A connection busy (connecting
/// or waiting for an answer) for longer than four probe timeouts (2 s at least) is dropped.
/// After a failed connection attempt that leaves writes possible (timeout, unreachable, lost),
/// the next attempt waits a backoff of 250 ms doubling up to 4 s; until then the member reads
/// the same failure. Refused and starting members are retried every round.
/// The object may be destroyed on any thread; Start() on the loop thread only.
class PostgresAsyncProbe : public AsyncMemberProbe {
 public:
  PostgresAsyncProbe(MemberSpec member, Millis timeout, EventLoop& loop = EventLoop::Shared());
  ~PostgresAsyncProbe() override;
  PostgresAsyncProbe(const PostgresAsyncProbe&) = delete;
  PostgresAsyncProbe& operator=(const PostgresAsyncProbe&) = delete;

  void Start(SteadyClock::time_point deadline, std::shared_ptr<LoopGate> gate, Done done) override;
  EventLoop& loop() override { return loop_; }

 private:
  struct Session;
  EventLoop& loop_;
  std::shared_ptr<Session> session_;
};

/// A PostgresAsyncProbe of `member` with its cluster's probe timeout: the member probe of every
/// kind whose members are PostgreSQL servers (probes/kinds/).
std::unique_ptr<MemberProbe> PostgresMemberProbe(const ClusterSpec& spec, const MemberSpec& member);

}  // namespace sbd
