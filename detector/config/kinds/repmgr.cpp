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

// repmgr's witness node (`repmgr witness register`): a server outside replication holding its
// own copy of repmgr.nodes. Read as one more copy, never a member: it has no name to choose.
void ParseWitness(ConfigReader& r, const Entry& entry, const std::string& path,
                  ClusterSpec& cluster) {
  const std::optional<Fields> fields =
      r.ReadMapping(entry, path, {"dsn", "password_file", "password_env"});
  if (!fields) return;
  MemberSpec witness;
  witness.name = "witness node";  // no member can be named so (names have no space)
  r.PasswordSources(*fields, path, witness.password_file, witness.password_env);
  const Entry* dsn = r.Required(*fields, entry.value, path, "dsn");
  std::optional<ParsedDsn> parsed = dsn ? r.Dsn(*dsn, Join(path, "dsn")) : std::nullopt;
  if (!parsed) return;
  witness.dsn = std::move(parsed->dsn);
  witness.address = std::move(parsed->address);
  witness.inline_password = std::move(parsed->password);
  for (const char* key : {"password_file", "password_env"}) {
    const Entry* source = r.Optional(*fields, key);
    if (witness.inline_password && source) {
      r.AddError(source->Mark(), Join(path, key),
                 std::string("password given both inline in dsn and in ") + key);
    }
  }
  cluster.repmgr_witness = std::move(witness);
}

}  // namespace

// repmgr: members are PostgreSQL servers (ParsePostgresMember); the optional block names the
// metadata database each member's copy of repmgr.nodes is read from (repmgr's default: repmgr)
// and, for discovery, the seeds; and the witness node, whose copy is read beside the members'.
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
  const std::optional<Fields> fields =
      r.ReadMapping(*entry, block, {"database", "seeds", "witness"});
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
  if (const Entry* witness = r.Optional(*fields, "witness")) {
    ParseWitness(r, *witness, Join(block, "witness"), cluster);
  }
}

}  // namespace sbd
