#include "detector/config/kinds/kinds.h"
#include "detector/config/kinds/shared.h"

namespace sbd {

using namespace cfg;
using namespace kind_parsing;

// etcd elections and locks: the gateway, the prefix, the claim query.
void ParseEtcdElection(ConfigReader& r, ClusterContext& context, ClusterSpec& cluster) {
  const std::string block = Join(context.path, "etcd_election");
  const Entry* entry = r.Optional(context.fields, "etcd_election");
  if (!entry) {
    if (context.kind) r.AddError(context.node.Mark(), block, "required");
    return;
  }
  const std::optional<Fields> election =
      r.ReadMapping(*entry, block, {"endpoints", "prefix", "claim", "resource_witness"});
  if (!election) return;
  EtcdElectionSpec& spec = cluster.etcd_election;
  spec.lock = cluster.name;
  if (const Entry* endpoints = r.Required(*election, entry->value, block, "endpoints")) {
    spec.endpoints = EtcdEndpoints(r, *endpoints, Join(block, "endpoints"));
  }
  if (const Entry* prefix = r.Required(*election, entry->value, block, "prefix")) {
    const std::string at = Join(block, "prefix");
    const std::optional<std::string> value = r.String(*prefix, at);
    if (value && (value->empty() || value->size() > kMaxLeaseKeyBytes)) {
      r.AddError(prefix->Mark(), at,
                 "expected 1 to " + std::to_string(kMaxLeaseKeyBytes) + " bytes");
    } else if (value) {
      spec.prefix = *value;
    }
  }
  if (const Entry* claim = r.Optional(*election, "claim")) {
    ParseClaimQuery(r, *claim, Join(block, "claim"), spec);
  }
  if (const Entry* witness = r.Optional(*election, "resource_witness")) {
    spec.resource_witness =
        ParseResourceWitness(r, *witness, Join(block, "resource_witness"), spec.lock);
  }
}

}  // namespace sbd
