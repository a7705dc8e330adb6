#pragma once

#include <memory>
#include <pqxx/connection>
#include <string>

#include "detector/config/config.h"
#include "probes/probe.h"

namespace sbd {

/// Probes one PostgreSQL member through libpqxx over a persistent, read-only session.
/// The connection is rebuilt after any failure that may have broken it. Every call is
/// bounded: connect_timeout while connecting, then the deadline watchdog shuts the socket
/// down if the server stops answering (a frozen server never trips statement_timeout).
/// Not thread-safe: one Probe() at a time per instance.
class PostgresProbe : public MemberProbe {
 public:
  PostgresProbe(MemberSpec member, Millis timeout);
  ~PostgresProbe() override;
  PostgresProbe(const PostgresProbe&) = delete;
  PostgresProbe& operator=(const PostgresProbe&) = delete;

  Observation Probe(SteadyClock::time_point deadline, StartGate* gate) override;

  /// The SQL of one reading: one round trip, read-only, visible for review.
  static const char* ReadingQuery();

 private:
  std::variant<std::string, ProbeFailure> ConnectionString(SteadyClock::time_point deadline) const;

  /// Runs the reading query on the open connection under the deadline watchdog.
  std::variant<PostgresReading, ProbeFailure> Read(SteadyClock::time_point deadline,
                                                   bool* drop_connection);

  MemberSpec member_;
  Millis timeout_;
  std::unique_ptr<pqxx::connection> conn_;
};

}  // namespace sbd
