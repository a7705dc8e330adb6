#include "detector/config/kinds/kinds.h"
#include "detector/config/kinds/shared.h"

namespace sbd {

using namespace cfg;
using namespace kind_parsing;

namespace {

// `tls: true` with its CA file, an optional client certificate and key, and a server name;
// the tls_* keys without `tls: true` would be silently unused, so they are errors.
void ParseRedisTls(ConfigReader& r, const Fields& redis, const YAML::Node& node,
                   const std::string& block, RedisSpec& spec) {
  const Entry* tls = r.Optional(redis, "tls");
  const bool on = tls != nullptr && r.Bool(*tls, Join(block, "tls")).value_or(false);
  const char* const keys[] = {"tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_name"};
  if (!on) {
    for (const char* key : keys) {
      if (const Entry* unused = r.Optional(redis, key)) {
        r.AddError(unused->key.Mark(), Join(block, key), "only valid with tls: true");
      }
    }
    return;
  }
  RedisTlsSpec& out = spec.tls.emplace();
  if (const Entry* ca = r.Required(redis, node, block, "tls_ca_file")) {
    out.ca_file = r.String(*ca, Join(block, "tls_ca_file")).value_or("");
  }
  const Entry* cert = r.Optional(redis, "tls_cert_file");
  const Entry* key = r.Optional(redis, "tls_key_file");
  if (cert) out.cert_file = r.String(*cert, Join(block, "tls_cert_file")).value_or("");
  if (key) out.key_file = r.String(*key, Join(block, "tls_key_file")).value_or("");
  if ((cert == nullptr) != (key == nullptr)) {
    const Entry* given = cert != nullptr ? cert : key;
    r.AddError(given->key.Mark(), Join(block, cert != nullptr ? "tls_cert_file" : "tls_key_file"),
               "tls_cert_file and tls_key_file go together");
  }
  if (const Entry* name = r.Optional(redis, "tls_server_name")) {
    out.server_name = r.String(*name, Join(block, "tls_server_name")).value_or("");
  }
}

}  // namespace

// Redis: the Sentinel group, the login, and members by address.
void ParseRedis(ConfigReader& r, ClusterContext& context, ClusterSpec& cluster) {
  const std::string& path = context.path;
  const Entry* entry = r.Optional(context.fields, "redis");
  if (!entry) {
    if (context.kind) r.AddError(context.node.Mark(), Join(path, "redis"), "required");
    return;
  }
  const std::string block = Join(path, "redis");
  const std::optional<Fields> redis =
      r.ReadMapping(*entry, block,
                    {"master_name", "sentinels", "username", "password_file", "password_env",
                     "sentinel_username", "sentinel_password_file", "sentinel_password_env", "tls",
                     "tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_name"});
  if (!redis) return;
  RedisSpec& spec = cluster.redis;
  if (const Entry* name = r.Required(*redis, entry->value, block, "master_name")) {
    spec.master_name = r.ValidName(*name, Join(block, "master_name")).value_or("");
  }
  const Entry* sentinels = r.Required(*redis, entry->value, block, "sentinels");
  const std::string list = Join(block, "sentinels");
  if (sentinels && r.NonEmptySequence(*sentinels, list, "sentinel")) {
    for (size_t i = 0; i < sentinels->value.size(); ++i) {
      spec.sentinels.push_back(
          RedisAddress(r, r.Item(sentinels->value[i]), Index(list, i)).value_or(""));
    }
  }
  if (const Entry* user = r.Optional(*redis, "username")) {
    spec.username = r.ValidName(*user, Join(block, "username")).value_or("");
  }
  r.PasswordSources(*redis, block, spec.password_file, spec.password_env);
  if (const Entry* user = r.Optional(*redis, "sentinel_username")) {
    spec.sentinel_username = r.ValidName(*user, Join(block, "sentinel_username")).value_or("");
  }
  r.PasswordSources(*redis, block, spec.sentinel_password_file, spec.sentinel_password_env,
                    "sentinel_");
  ParseRedisTls(r, *redis, entry->value, block, spec);
}

// A Redis server by address; the password is the block's, for every member.
MemberSpec ParseRedisMember(ConfigReader& r, const ClusterContext&, const ClusterSpec& cluster,
                            const YAML::Node& node, const std::string& path, SeenNames& seen) {
  MemberSpec member;
  member.password_file = cluster.redis.password_file;
  member.password_env = cluster.redis.password_env;
  const std::optional<Fields> fields = r.ReadMapping(node, path, {"name", "address"});
  if (!fields) return member;
  if (const Entry* name = r.Required(*fields, node, path, "name")) {
    member.name = r.Name(*name, Join(path, "name"), seen, "member").value_or("");
  }
  if (const Entry* address = r.Required(*fields, node, path, "address")) {
    member.address = RedisAddress(r, *address, Join(path, "address")).value_or("");
  }
  return member;
}

}  // namespace sbd
