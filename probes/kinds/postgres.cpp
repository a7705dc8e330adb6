// The postgres kind: PostgreSQL servers, each read for pg_is_in_recovery and its lineage; no
// lock store: the members' claims are all there is.
#include "probes/kind.h"
#include "probes/postgres_async.h"

namespace sbd {

KindDescriptor PostgresKind() {
  KindDescriptor kind;
  kind.config.name = "postgres";
  kind.config.parse_member = ParsePostgresMember;
  kind.config.words = &kWritableWords;
  kind.config.remediation = RemediationSupport::kNone;
  kind.member = PostgresMemberProbe;
  return kind;
}

}  // namespace sbd
