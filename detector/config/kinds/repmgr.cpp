#include "detector/config/kinds/kinds.h"
#include "detector/config/kinds/shared.h"

namespace sbd {

using namespace cfg;
using namespace kind_parsing;

namespace {

// Where discovery starts when no member is listed: host:port of any node, read with
// discovery's settings.
void ParseSeeds(ConfigReader& r, const Entry& entry, const std::string& path,
                ClusterSpec& cluster) {
  if (!r.NonEmptySequence(entry, path, "seed")) return;
  for (size_t i = 0; i < entry.value.size(); ++i) {
    const std::optional<std::string> seed = RedisAddress(r, r.Item(entry.value[i]), Index(path, i));
    if (seed) cluster.repmgr_seeds.push_back(*seed);
  }
}

}  // namespace

// repmgr: members are PostgreSQL servers (ParsePostgresMember); the optional block names the
// metadata database each member's copy of repmgr.nodes is read from (repmgr's default: repmgr)
// and, for discovery, the seeds.
void ParseRepmgr(ConfigReader& r, ClusterContext& context, ClusterSpec& cluster) {
  ParseDiscover(r, context, cluster, "repmgr.nodes' conninfo");
  const Entry* entry = r.Optional(context.fields, "repmgr");
  const std::string block = Join(context.path, "repmgr");
  const Entry* members = r.Optional(context.fields, "members");
  const bool listed = members && members->value.IsSequence() && members->value.size() > 0;
  if (context.kind && cluster.discovery.enabled && !listed &&
      (!entry || !entry->value.IsMap() || !entry->value["seeds"])) {
    r.AddError(entry ? entry->Mark() : context.node.Mark(), Join(block, "seeds"),
               "required with discover: true and no member listed: where the record is first "
               "read");
  }
  if (!entry) return;
  const std::optional<Fields> fields = r.ReadMapping(*entry, block, {"database", "seeds"});
  if (!fields) return;
  if (const Entry* database = r.Optional(*fields, "database")) {
    const std::string at = Join(block, "database");
    const std::optional<std::string> name = r.String(*database, at);
    // PostgreSQL's identifiers: at most NAMEDATALEN - 1 bytes.
    if (name && (name->empty() || name->size() > 63 || name->find('\0') != std::string::npos)) {
      r.AddError(database->Mark(), at, "expected a database name of 1 to 63 bytes");
    } else if (name) {
      cluster.repmgr_database = *name;
    }
  }
  if (const Entry* seeds = r.Optional(*fields, "seeds")) {
    ParseSeeds(r, *seeds, Join(block, "seeds"), cluster);
  }
}

}  // namespace sbd
