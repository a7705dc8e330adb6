#include "detector/config/kinds/shared.h"

#include <algorithm>

#include "detector/config/kinds/kinds.h"

namespace sbd {
namespace kind_parsing {

using namespace cfg;

std::optional<std::string> RedisAddress(ConfigReader& r, const Entry& entry,
                                        const std::string& path) {
  const std::optional<std::string> text = r.String(entry, path);
  if (!text) return std::nullopt;
  const HostPort at = SplitHostPort(*text, "");
  const bool digits = !at.port.empty() && at.port.size() <= 5 &&
                      std::all_of(at.port.begin(), at.port.end(), IsDigit);
  const long port = digits ? std::stol(at.port) : 0;
  if (at.host.empty() || port < 1 || port > 65535 ||
      at.host.find_first_of(" \t\r\n/") != std::string::npos) {
    r.AddError(entry.Mark(), path, "expected host:port");
    return std::nullopt;
  }
  return *text;
}

std::vector<std::string> EtcdEndpoints(ConfigReader& r, const Entry& endpoints,
                                       const std::string& path) {
  std::vector<std::string> urls;
  if (!r.NonEmptySequence(endpoints, path, "endpoint")) return urls;
  for (size_t i = 0; i < endpoints.value.size(); ++i) {
    const std::optional<std::string> url =
        r.HttpUrl(r.Item(endpoints.value[i]), Index(path, i), true);
    if (url) urls.push_back(*url);
  }
  return urls;
}

std::optional<ResourceWitnessSpec> ParseResourceWitness(ConfigReader& r, const Entry& entry,
                                                        const std::string& path,
                                                        const std::string& lock) {
  // The witness's query has the claim's fields, but no token label.
  struct Names {
    std::string claim_metric = ResourceWitnessSpec{}.metric;
    std::string lock_label = ResourceWitnessSpec{}.lock_label;
    std::string token_label;
    std::string lock;
  } names;
  names.lock = lock;
  const size_t errors = r.errors().size();
  const std::optional<Fields> fields = ParseClaimQuery(r, entry, path, names, true);
  if (!fields) return std::nullopt;
  ResourceWitnessSpec witness;
  if (const Entry* url = r.Required(*fields, entry.value, path, "url")) {
    witness.url = r.HttpUrl(*url, Join(path, "url"), false).value_or("");
  }
  if (r.errors().size() != errors) return std::nullopt;
  witness.metric = names.claim_metric;
  witness.lock_label = names.lock_label;
  witness.lock = names.lock;
  return witness;
}

namespace {

// Settings for members found in the record: their host and port come from there, so the dsn may
// not set them, and the password must come from a file or the environment.
void ParseDiscovery(ConfigReader& r, const Entry& entry, const std::string& path,
                    DiscoverySpec& discovery, const std::string& record) {
  const std::optional<Fields> fields = r.ReadMapping(
      entry, path, {"dsn", "password_file", "password_env", "max_members", "expire_after"});
  if (!fields) return;
  r.PasswordSources(*fields, path, discovery.password_file, discovery.password_env);
  if (const Entry* max = r.Optional(*fields, "max_members")) {
    discovery.max_members =
        r.Count(*max, Join(path, "max_members"), 1, 1000).value_or(discovery.max_members);
  }
  const ConfigReader::Timing expire = r.Duration(*fields, path, "expire_after", Millis(1000));
  if (expire.ok && expire.given) discovery.expire_after = *expire.given;
  const std::string from = "discovered members take host and port from " + record;
  discovery.dsn = r.HostlessDsn(r.Optional(*fields, "dsn"), Join(path, "dsn"), from.c_str());
}

}  // namespace

void ParseDiscover(ConfigReader& r, ClusterContext& context, ClusterSpec& cluster,
                   const char* record) {
  const Fields& fields = context.fields;
  const std::string& path = context.path;
  // Whether members are discovered; nullopt when `discover` was invalid (reported), which
  // waives the check for an empty member list rather than guessing.
  std::optional<bool> discover = false;
  if (const Entry* entry = r.Optional(fields, "discover")) {
    discover = r.Bool(*entry, Join(path, "discover"));
    cluster.discovery.enabled = discover.value_or(false);
  }
  if (const Entry* discovery = r.Optional(fields, "discovery")) {
    ParseDiscovery(r, *discovery, Join(path, "discovery"), cluster.discovery, record);
  }
  context.members_optional = discover.value_or(true);
  if (context.kind) {
    context.no_members_error = "must list at least one member or set discover: true";
  }
}

}  // namespace kind_parsing

using namespace cfg;
using namespace kind_parsing;

// The candidates of redis_lease, k8s_lease and etcd_election: where each exports its claim,
// and the value it writes into the record, if any.
MemberSpec ParseClaimMember(ConfigReader& r, const ClusterContext&, const ClusterSpec&,
                            const YAML::Node& node, const std::string& path, SeenNames& seen) {
  MemberSpec member;
  const std::optional<Fields> fields =
      r.ReadMapping(node, path, {"name", "metrics_url", "identity"});
  if (!fields) return member;
  if (const Entry* name = r.Required(*fields, node, path, "name")) {
    member.name = r.Name(*name, Join(path, "name"), seen, "member").value_or("");
  }
  if (const Entry* url = r.Required(*fields, node, path, "metrics_url")) {
    member.claim_url = r.HttpUrl(*url, Join(path, "metrics_url"), false).value_or("");
    member.address = member.claim_url;
  }
  if (const Entry* identity = r.Optional(*fields, "identity")) {
    const std::optional<std::string> value = r.String(*identity, Join(path, "identity"));
    if (value && (value->empty() || value->size() > kMaxLeaseKeyBytes)) {
      r.AddError(identity->Mark(), Join(path, "identity"),
                 "expected 1 to " + std::to_string(kMaxLeaseKeyBytes) + " bytes");
    } else if (value) {
      member.lease_identity = *value;
    }
  }
  return member;
}

}  // namespace sbd
