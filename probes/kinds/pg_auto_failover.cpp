// The pg_auto_failover kind: PostgreSQL servers run by pg_auto_failover: the monitor's formation
// state is the record.
#include "probes/pg_auto_failover.h"

#include "probes/kind.h"
#include "probes/postgres_async.h"

namespace sbd {
namespace {

std::unique_ptr<LockStore> PgAutoFailoverMonitorStore(const ClusterSpec& spec) {
  return std::make_unique<PgAutoFailoverStore>(spec);
}

std::string PgAutoFailoverMonitorRecord(const ClusterSpec& spec) {
  return PgAutoFailoverRecord(spec.pg_auto_failover);
}

}  // namespace

KindDescriptor PgAutoFailoverKind() {
  KindDescriptor kind;
  kind.config.name = "pg_auto_failover";
  kind.config.block = "pg_auto_failover";
  kind.config.keys = {"discover", "discovery"};
  kind.config.parse = ParsePgAutoFailover;
  kind.config.parse_member = ParsePostgresMember;
  kind.config.words = &kWritableWords;
  kind.config.remediation = RemediationSupport::kPostgresFence;
  kind.member = PostgresMemberProbe;
  kind.store = PgAutoFailoverMonitorStore;
  kind.record = PgAutoFailoverMonitorRecord;
  return kind;
}

}  // namespace sbd
