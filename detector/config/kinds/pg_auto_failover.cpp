#include "detector/config/kinds/kinds.h"
#include "detector/config/kinds/shared.h"

namespace sbd {

using namespace cfg;
using namespace kind_parsing;

namespace {

// pg_auto_failover's formation ids are `text`, but its tools take them on the command line and
// in names: a name the detector can show and put in a label.
constexpr size_t kMaxFormationBytes = 63;

void ParseMonitor(ConfigReader& r, const Fields& block, const Entry& entry, const std::string& path,
                  MemberSpec& monitor) {
  monitor.name = "monitor";
  r.PasswordSources(block, path, monitor.password_file, monitor.password_env, "monitor_");
  const Entry* dsn = r.Required(block, entry.value, path, "monitor");
  std::optional<ParsedDsn> parsed = dsn ? r.Dsn(*dsn, Join(path, "monitor")) : std::nullopt;
  if (!parsed) return;
  monitor.dsn = std::move(parsed->dsn);
  monitor.address = std::move(parsed->address);
  monitor.inline_password = std::move(parsed->password);
  for (const char* key : {"monitor_password_file", "monitor_password_env"}) {
    const Entry* source = r.Optional(block, key);
    if (monitor.inline_password && source) {
      r.AddError(source->Mark(), Join(path, key),
                 std::string("password given both inline in monitor and in ") + key);
    }
  }
}

}  // namespace

// pg_auto_failover: the monitor's DSN and password source, the formation and the group; and
// discover/discovery, members found in the monitor's nodes.
void ParsePgAutoFailover(ConfigReader& r, ClusterContext& context, ClusterSpec& cluster) {
  ParseDiscover(r, context, cluster, "the monitor's pgautofailover.node");
  const std::string block = Join(context.path, "pg_auto_failover");
  const Entry* entry = r.Optional(context.fields, "pg_auto_failover");
  if (!entry) {
    if (context.kind) r.AddError(context.node.Mark(), block, "required");
    return;
  }
  const std::optional<Fields> fields = r.ReadMapping(
      *entry, block,
      {"monitor", "monitor_password_file", "monitor_password_env", "formation", "group"});
  if (!fields) return;
  PgAutoFailoverSpec& spec = cluster.pg_auto_failover;
  ParseMonitor(r, *fields, *entry, block, spec.monitor);
  if (const Entry* formation = r.Optional(*fields, "formation")) {
    const std::string at = Join(block, "formation");
    const std::optional<std::string> value = r.String(*formation, at);
    if (value && (value->empty() || value->size() > kMaxFormationBytes)) {
      r.AddError(formation->Mark(), at,
                 "expected 1 to " + std::to_string(kMaxFormationBytes) + " bytes");
    } else if (value) {
      spec.formation = *value;
    }
  }
  if (const Entry* group = r.Optional(*fields, "group")) {
    spec.group = r.Count(*group, Join(block, "group"), 0, 1000000).value_or(0);
  }
}

}  // namespace sbd
