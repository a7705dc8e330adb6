#include "detector/config/kinds/kinds.h"
#include "detector/config/kinds/shared.h"

namespace sbd {

using namespace cfg;
using namespace kind_parsing;

namespace {

// key or pattern (exactly one), and the SCAN caps, which only a pattern uses.
void ParseLeaseKeys(ConfigReader& r, const Fields& lease, const Entry& entry,
                    const std::string& block, RedisLeaseSpec& spec) {
  const Entry* key = r.Optional(lease, "key");
  const Entry* pattern = r.Optional(lease, "pattern");
  if (key && pattern) {
    r.AddError(pattern->key.Mark(), Join(block, "pattern"),
               "only one of key and pattern may be set");
  } else if (!key && !pattern) {
    r.AddError(entry.Mark(), Join(block, "key"), "required (or pattern)");
  }
  auto text = [&](const Entry* e, const char* name) {
    const std::string at = Join(block, name);
    std::optional<std::string> value = r.String(*e, at);
    if (value && (value->empty() || value->size() > kMaxLeaseKeyBytes)) {
      r.AddError(e->Mark(), at, "expected 1 to " + std::to_string(kMaxLeaseKeyBytes) + " bytes");
      return std::string();
    }
    return value.value_or("");
  };
  if (key) spec.key = text(key, "key");
  if (pattern) spec.pattern = text(pattern, "pattern");
  for (const char* cap : {"max_keys", "max_scan_iterations"}) {
    const Entry* e = r.Optional(lease, cap);
    if (!e) continue;
    if (!pattern) {
      r.AddError(e->key.Mark(), Join(block, cap), "only valid with pattern");
      continue;
    }
    const auto n = r.Count(*e, Join(block, cap), 1, 100000);
    int& field = std::string(cap) == "max_keys" ? spec.max_keys : spec.max_scan_iterations;
    field = n.value_or(field);
  }
}

}  // namespace

// Application leases: the key, the login, the claim query, candidates by metrics URL.
void ParseRedisLease(ConfigReader& r, ClusterContext& context, ClusterSpec& cluster) {
  const std::string& path = context.path;
  const Entry* entry = r.Optional(context.fields, "redis_lease");
  if (!entry) {
    if (context.kind) r.AddError(context.node.Mark(), Join(path, "redis_lease"), "required");
    return;
  }
  const std::string block = Join(path, "redis_lease");
  const std::optional<Fields> lease =
      r.ReadMapping(*entry, block,
                    {"address", "username", "password_file", "password_env", "key", "pattern",
                     "max_keys", "max_scan_iterations", "claim"});
  if (!lease) return;
  RedisLeaseSpec& spec = cluster.redis_lease;
  spec.lock = cluster.name;
  if (const Entry* address = r.Required(*lease, entry->value, block, "address")) {
    spec.address = RedisAddress(r, *address, Join(block, "address")).value_or("");
  }
  if (const Entry* user = r.Optional(*lease, "username")) {
    spec.username = r.ValidName(*user, Join(block, "username")).value_or("");
  }
  r.PasswordSources(*lease, block, spec.password_file, spec.password_env);
  ParseLeaseKeys(r, *lease, *entry, block, spec);
  if (const Entry* claim = r.Optional(*lease, "claim")) {
    ParseClaimQuery(r, *claim, Join(block, "claim"), spec);
  }
}

}  // namespace sbd
