// The repmgr kind: PostgreSQL servers run by repmgr: each member's copy of repmgr.nodes (and the
// witness's) is the record, by majority.
#include "probes/repmgr.h"

#include "probes/kind.h"
#include "probes/postgres_async.h"

namespace sbd {
namespace {

std::unique_ptr<LockStore> RepmgrNodesStore(const ClusterSpec& spec) {
  return std::make_unique<RepmgrStore>(
      spec.members, spec.repmgr_database, spec.probe_timeout, EventLoop::Shared(),
      RepmgrDiscoverySettings{spec.discovery, spec.repmgr_seeds}, spec.repmgr_witness);
}

std::string RepmgrNodesRecord(const ClusterSpec& spec) {
  return "repmgr.nodes in each member's database " + spec.repmgr_database +
         (spec.repmgr_witness ? " and the witness's" : "");
}

}  // namespace

KindDescriptor RepmgrKind() {
  KindDescriptor kind;
  kind.config.name = "repmgr";
  kind.config.block = "repmgr";
  kind.config.keys = {"discover", "discovery"};
  kind.config.parse = ParseRepmgr;
  kind.config.parse_member = ParsePostgresMember;
  kind.config.words = &kWritableWords;
  kind.config.remediation = RemediationSupport::kPostgresFence;
  kind.member = PostgresMemberProbe;
  kind.store = RepmgrNodesStore;
  kind.record = RepmgrNodesRecord;
  return kind;
}

}  // namespace sbd
