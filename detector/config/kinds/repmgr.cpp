#include "detector/config/kinds/kinds.h"
#include "detector/config/kinds/shared.h"

namespace sbd {

using namespace cfg;
using namespace kind_parsing;

// repmgr: members are PostgreSQL servers (ParsePostgresMember); the optional block names the
// metadata database each member's copy of repmgr.nodes is read from (repmgr's default: repmgr).
void ParseRepmgr(ConfigReader& r, ClusterContext& context, ClusterSpec& cluster) {
  const Entry* entry = r.Optional(context.fields, "repmgr");
  if (!entry) return;
  const std::string block = Join(context.path, "repmgr");
  const std::optional<Fields> fields = r.ReadMapping(*entry, block, {"database"});
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
}

}  // namespace sbd
