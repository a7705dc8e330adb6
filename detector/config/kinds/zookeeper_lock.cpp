#include <algorithm>

#include "detector/config/kinds/kinds.h"
#include "detector/config/kinds/shared.h"

namespace sbd {

using namespace cfg;
using namespace kind_parsing;

namespace {

// A znode path as ZooKeeper accepts it: absolute, no empty, "." or ".." component, no
// trailing '/', no control character; the root itself holds no lock.
bool IsZnodePath(const std::string& path) {
  if (path.size() < 2 || path.size() > kMaxLeaseKeyBytes || path.front() != '/' ||
      path.back() == '/') {
    return false;
  }
  if (std::any_of(path.begin(), path.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return false;
  }
  size_t start = 1;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

void ParseHosts(ConfigReader& r, const Entry& hosts, const std::string& path,
                ZooKeeperLockSpec& spec) {
  if (!r.NonEmptySequence(hosts, path, "host")) return;
  for (size_t i = 0; i < hosts.value.size(); ++i) {
    // host:port as for Redis; a ',' would split the C client's host list.
    const Entry item = r.Item(hosts.value[i]);
    const std::optional<std::string> host = RedisAddress(r, item, Index(path, i));
    if (host && host->find(',') != std::string::npos) {
      r.AddError(item.Mark(), Index(path, i), "expected host:port");
    } else if (host) {
      spec.hosts.push_back(*host);
    }
  }
}

void ParseDigest(ConfigReader& r, const Entry& entry, const std::string& path,
                 ZooKeeperLockSpec& spec) {
  const std::optional<Fields> digest =
      r.ReadMapping(entry, path, {"username", "password_file", "password_env"});
  if (!digest) return;
  if (const Entry* user = r.Required(*digest, entry.value, path, "username")) {
    const std::optional<std::string> value = r.String(*user, Join(path, "username"));
    if (value && (value->empty() || value->find(':') != std::string::npos)) {
      r.AddError(user->Mark(), Join(path, "username"), "expected a non-empty name without ':'");
    } else if (value) {
      spec.username = *value;
    }
  }
  r.PasswordSources(*digest, path, spec.password_file, spec.password_env);
  if (!r.Optional(*digest, "password_file") && !r.Optional(*digest, "password_env")) {
    r.AddError(entry.Mark(), path, "expected password_file or password_env");
  }
}

}  // namespace

namespace kind_parsing {

void ParseZooKeeperEnsemble(ConfigReader& r, const Entry& block, const Fields& fields,
                            const std::string& path, ZooKeeperLockSpec& spec) {
  if (const Entry* hosts = r.Required(fields, block.value, path, "hosts")) {
    ParseHosts(r, *hosts, Join(path, "hosts"), spec);
  }
  const ConfigReader::Timing session =
      r.Duration(fields, path, "session_timeout", std::chrono::milliseconds(1000));
  if (session.given) spec.session_timeout = *session.given;
  if (const Entry* max = r.Optional(fields, "max_children")) {
    spec.max_children =
        r.Count(*max, Join(path, "max_children"), 1, 100000).value_or(spec.max_children);
  }
  if (const Entry* max = r.Optional(fields, "max_data_bytes")) {
    spec.max_data_bytes =
        r.Count(*max, Join(path, "max_data_bytes"), 1, 65536).value_or(spec.max_data_bytes);
  }
  if (const Entry* digest = r.Optional(fields, "digest")) {
    ParseDigest(r, *digest, Join(path, "digest"), spec);
  }
  // Refused in words rather than as an unknown key: the setting exists, the client cannot.
  if (const Entry* tls = r.Optional(fields, "tls")) {
    r.AddError(tls->Mark(), Join(path, "tls"),
               "not supported: Debian 12's ZooKeeper C client is built without TLS; reach the "
               "ensemble over a trusted network or a local TLS tunnel");
  }
}

}  // namespace kind_parsing

// ZooKeeper lock and election recipes: the ensemble, the lock path, limits, digest, the claim.
void ParseZooKeeperLock(ConfigReader& r, ClusterContext& context, ClusterSpec& cluster) {
  const std::string block = Join(context.path, "zookeeper_lock");
  const Entry* entry = r.Optional(context.fields, "zookeeper_lock");
  if (!entry) {
    if (context.kind) r.AddError(context.node.Mark(), block, "required");
    return;
  }
  const std::optional<Fields> lock =
      r.ReadMapping(*entry, block,
                    {"hosts", "path", "session_timeout", "max_children", "max_data_bytes", "digest",
                     "tls", "claim", "resource_witness"});
  if (!lock) return;
  ZooKeeperLockSpec& spec = cluster.zookeeper_lock;
  spec.lock = cluster.name;
  ParseZooKeeperEnsemble(r, *entry, *lock, block, spec);
  if (const Entry* path = r.Required(*lock, entry->value, block, "path")) {
    const std::optional<std::string> value = r.String(*path, Join(block, "path"));
    if (value && !IsZnodePath(*value)) {
      r.AddError(path->Mark(), Join(block, "path"),
                 "expected an absolute znode path (\"/locks/orders\"), no trailing '/'");
    } else if (value) {
      spec.path = *value;
    }
  }
  if (const Entry* claim = r.Optional(*lock, "claim")) {
    ParseClaimQuery(r, *claim, Join(block, "claim"), spec);
  }
  if (const Entry* witness = r.Optional(*lock, "resource_witness")) {
    spec.resource_witness =
        ParseResourceWitness(r, *witness, Join(block, "resource_witness"), spec.lock);
  }
}

}  // namespace sbd
