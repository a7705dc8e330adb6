#include "detector/config/kinds/kinds.h"
#include "detector/config/kinds/shared.h"

namespace sbd {

using namespace cfg;
using namespace kind_parsing;

namespace {

// api_server (with token_file and ca_file, a service account's by default) or kubeconfig.
void ParseK8sLeaseSource(ConfigReader& r, const Fields& lease, const Entry& entry,
                         const std::string& block, K8sLeaseSpec& spec) {
  const Entry* server = r.Optional(lease, "api_server");
  const Entry* kubeconfig = r.Optional(lease, "kubeconfig");
  if (server && kubeconfig) {
    r.AddError(kubeconfig->key.Mark(), Join(block, "kubeconfig"),
               "only one of api_server and kubeconfig may be set");
  } else if (!server && !kubeconfig) {
    r.AddError(entry.Mark(), Join(block, "api_server"), "required (or kubeconfig)");
  }
  if (server) {
    spec.api_server = r.HttpUrl(*server, Join(block, "api_server"), true).value_or("");
    if (!spec.api_server.empty() && !StartsWith(spec.api_server, "https://")) {
      r.AddError(server->Mark(), Join(block, "api_server"), "expected an https:// URL");
    }
    spec.token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
    spec.ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  }
  for (const char* key : {"token_file", "ca_file", "kubeconfig"}) {
    const Entry* e = r.Optional(lease, key);
    if (!e) continue;
    if (kubeconfig && std::string(key) != "kubeconfig") {
      r.AddError(e->key.Mark(), Join(block, key), "not valid with kubeconfig (it names its own)");
      continue;
    }
    const std::optional<std::string> value = r.String(*e, Join(block, key));
    if (value && value->empty()) r.AddError(e->Mark(), Join(block, key), "expected a path");
    if (!value || value->empty()) continue;
    const std::string name = key;
    (name == "token_file" ? spec.token_file
     : name == "ca_file"  ? spec.ca_file
                          : spec.kubeconfig) = *value;
  }
}

}  // namespace

// Kubernetes Leases: the API server and its credentials, the Lease, the claim query.
void ParseK8sLease(ConfigReader& r, ClusterContext& context, ClusterSpec& cluster) {
  const std::string& path = context.path;
  const Entry* entry = r.Optional(context.fields, "k8s_lease");
  if (!entry) {
    if (context.kind) r.AddError(context.node.Mark(), Join(path, "k8s_lease"), "required");
    return;
  }
  const std::string block = Join(path, "k8s_lease");
  const std::optional<Fields> lease = r.ReadMapping(
      *entry, block,
      {"api_server", "namespace", "lease", "token_file", "ca_file", "kubeconfig", "claim"});
  if (!lease) return;
  K8sLeaseSpec& spec = cluster.k8s_lease;
  spec.lease = cluster.name;
  ParseK8sLeaseSource(r, *lease, *entry, block, spec);
  for (const char* key : {"namespace", "lease"}) {
    const Entry* e = r.Optional(*lease, key);
    if (!e) continue;
    const std::optional<std::string> value = r.ValidName(*e, Join(block, key));
    if (value) (std::string(key) == "lease" ? spec.lease : spec.lease_namespace) = *value;
  }
  spec.lock = spec.lease;
  if (const Entry* claim = r.Optional(*lease, "claim")) {
    ParseClaimQuery(r, *claim, Join(block, "claim"), spec);
  }
}

}  // namespace sbd
