#include "detector/config/kinds/kinds.h"
#include "detector/config/kinds/shared.h"

namespace sbd {

using namespace cfg;
using namespace kind_parsing;

// A PostgreSQL server (kind postgres, and patroni's members): its libpq connection string, the
// password's source, and for Patroni its REST API. Also every member when `kind:` was invalid.
MemberSpec ParsePostgresMember(ConfigReader& r, const ClusterContext& context, const ClusterSpec&,
                               const YAML::Node& node, const std::string& path, SeenNames& seen) {
  MemberSpec member;
  const std::optional<Fields> fields =
      r.ReadMapping(node, path, {"name", "dsn", "password_file", "password_env", "patroni_url"});
  if (!fields) return member;
  if (const Entry* name = r.Required(*fields, node, path, "name")) {
    member.name = r.Name(*name, Join(path, "name"), seen, "member").value_or("");
  }
  const Entry* url = r.Optional(*fields, "patroni_url");
  if (url && context.kind && !context.kind->patroni_urls) {
    // Reported at the key and ignored; with an invalid kind the value is still checked.
    r.AddError(url->key.Mark(), Join(path, "patroni_url"), "only valid for kind: patroni");
  } else if (url) {
    member.patroni_url = r.HttpUrl(*url, Join(path, "patroni_url"), true).value_or("");
  }
  r.PasswordSources(*fields, path, member.password_file, member.password_env);
  const Entry* dsn = r.Required(*fields, node, path, "dsn");
  std::optional<ParsedDsn> parsed = dsn ? r.Dsn(*dsn, Join(path, "dsn")) : std::nullopt;
  if (!parsed) return member;
  member.dsn = std::move(parsed->dsn);
  member.address = std::move(parsed->address);
  member.inline_password = std::move(parsed->password);
  for (const char* key : {"password_file", "password_env"}) {
    const Entry* source = r.Optional(*fields, key);
    if (member.inline_password && source) {
      r.AddError(source->Mark(), Join(path, key),
                 std::string("password given both inline in dsn and in ") + key);
    }
  }
  return member;
}

}  // namespace sbd
