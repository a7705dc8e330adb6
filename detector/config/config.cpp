#include "detector/config/config.h"

#include <libpq-fe.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <system_error>
#include <tuple>

#include "detector/config/config_reader.h"
#include "detector/config/file_sd.h"

namespace sbd {
namespace {

using namespace cfg;

constexpr Millis kDefaultTtl{30000};
constexpr Millis kMinTtl{1000};
constexpr Millis kMinProbeInterval{100};
constexpr Millis kMinProbeTimeout{1};
constexpr Millis kMaxDefaultProbeTimeout{2000};
constexpr Millis kMinResendInterval{1000};
constexpr Millis kMinAlertTimeout{1};
constexpr Millis kMinSilenceRefresh{1000};
constexpr Millis kMinSilenceTimeout{100};
constexpr Millis kMinIncidentRetention{60000};
constexpr int kMaxIncidentEvents = 1000000;
constexpr const char* kPatroniOnly = "only valid for kind: patroni";
// Application leases: the longest key, pattern or identity accepted.
constexpr size_t kMaxLeaseKeyBytes = 1024;
// Labels the detector puts on every alert itself; external_labels may not override them.
constexpr const char* kReservedLabels[] = {"alertname", "severity", "cluster", "scope"};

using ReadResult = std::variant<std::string, std::error_code>;

ReadResult ReadFile(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) return std::error_code(errno, std::generic_category());
  std::string content;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) content.append(buffer, n);
  // Opening a directory succeeds; the read is what fails, with EISDIR.
  if (std::ferror(file.get())) return std::error_code(errno, std::generic_category());
  return content;
}

// Where the second YAML document of a text begins, if there is one. yaml-cpp 0.7's LoadAll
// loops forever, allocating, on some malformed texts (a lone ",": jbeder/yaml-cpp#1040), so
// documents are counted with a bounded loop instead and only the first is loaded.
class SecondDocument : public YAML::EventHandler {
 public:
  /// Parses at most two documents of `text`; throws YAML::Exception as YAML::Load does.
  static std::optional<YAML::Mark> Find(const std::string& text) {
    std::istringstream stream(text);
    YAML::Parser parser(stream);
    SecondDocument handler;
    for (int i = 0; i < 2 && parser.HandleNextDocument(handler); ++i) {
    }
    return handler.root_;
  }
  void OnDocumentStart(const YAML::Mark&) override { ++documents_; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnMapEnd() override {}

 private:
  // The second document's root node is its first node: the mark YAML::Node::Mark() gives.
  void Node(const YAML::Mark& mark) {
    if (documents_ == 2 && !root_) root_ = mark;
  }
  int documents_ = 0;
  std::optional<YAML::Mark> root_;
};

}  // namespace

class ConfigParser : public ConfigReader {
 public:
  explicit ConfigParser(std::string file) : ConfigReader(std::move(file)) {}

  ConfigResult Parse(const std::string& text) {
    YAML::Node root;
    try {
      if (auto second = SecondDocument::Find(text)) {
        AddError(*second, "", "expected a single YAML document");
      }
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      AddError(e.mark, "", e.msg);
      return Finish();
    }
    ParseRoot(root);
    return Finish();
  }

 private:
  // A cluster's kind; nullopt when `kind` was invalid (already reported), in which case the
  // checks that depend on the kind are skipped rather than piled on.
  using Kind = std::optional<ClusterKind>;

  ConfigResult Finish() {
    if (!errors().empty()) {
      std::stable_sort(errors().begin(), errors().end(), [](const auto& a, const auto& b) {
        return std::tie(a.line, a.column) < std::tie(b.line, b.column);
      });
      return std::move(errors());
    }
    ValidatedConfig config;
    config.clusters_ = std::move(clusters_);
    config.alerting_ = std::move(alerting_);
    config.suppressions_ = std::move(suppressions_);
    config.incident_log_ = std::move(incident_log_);
    config.watched_globs_ = std::move(watched_globs_);
    config.source_ = file();
    return config;
  }

  // ---- Top level.

  void ParseRoot(const YAML::Node& root) {
    if (root.IsNull()) {
      AddError(root.Mark(), "clusters", "required");
      return;
    }
    const std::optional<Fields> fields =
        ReadMapping(root, "", {"clusters", "alerting", "suppressions", "incident_log"});
    if (!fields) return;
    if (const Entry* alerting = Optional(*fields, "alerting")) ParseAlerting(*alerting, "alerting");
    if (const Entry* suppressions = Optional(*fields, "suppressions")) {
      ParseSuppressions(*suppressions, "suppressions");
    }
    if (const Entry* incidents = Optional(*fields, "incident_log")) {
      ParseIncidentLog(*incidents, "incident_log");
    }
    const Entry* clusters = Required(*fields, root, "", "clusters");
    if (!clusters || !NonEmptySequence(*clusters, "clusters", "cluster")) return;
    SeenNames seen;
    for (size_t i = 0; i < clusters->value.size(); ++i) {
      clusters_.push_back(ParseCluster(clusters->value[i], Index("clusters", i), seen));
    }
    CollectPageLabels();
  }

  // ---- Clusters.

  ClusterSpec ParseCluster(const YAML::Node& node, const std::string& path, SeenNames& seen) {
    ClusterSpec cluster;
    const std::optional<Fields> fields =
        ReadMapping(node, path,
                    {"name", "kind", "ttl", "probe_interval", "probe_timeout", "system_identifier",
                     "members", "scope", "namespace", "etcd", "discover", "discovery", "file_sd",
                     "redis", "redis_lease", "k8s_lease", "etcd_election", "watch"});
    if (!fields) return cluster;
    if (const Entry* name = Required(*fields, node, path, "name")) {
      cluster.name = Name(*name, Join(path, "name"), seen, "cluster").value_or("");
    }
    const Kind kind = ParseKind(*fields, path);
    cluster.kind = kind.value_or(ClusterKind::kPostgres);
    ParseTimings(*fields, path, cluster);
    // Patroni's own ttl lives in the DCS; without an explicit one the runtime follows it.
    cluster.ttl_from_dcs = kind == ClusterKind::kPatroni && !Optional(*fields, "ttl");
    if (const Entry* watch = Optional(*fields, "watch")) {
      cluster.watch = Bool(*watch, Join(path, "watch")).value_or(true);
    }
    if (const Entry* id = Optional(*fields, "system_identifier")) {
      ParseSystemIdentifier(*id, Join(path, "system_identifier"), cluster);
    }
    const std::optional<bool> discover = ParsePatroniSettings(*fields, node, path, kind, cluster);
    if (const Entry* file_sd = Optional(*fields, "file_sd"); file_sd && ClaimsOnly(kind)) {
      AddError(file_sd->key.Mark(), Join(path, "file_sd"),
               "not supported for kind: " + KindName(kind) + " yet");
    } else if (file_sd) {
      ParseFileSd(*file_sd, Join(path, "file_sd"), kind, cluster);
    }
    ParseRedisBlock(*fields, node, path, kind, cluster);
    ParseRedisLeaseBlock(*fields, node, path, kind, cluster);
    ParseK8sLeaseBlock(*fields, node, path, kind, cluster);
    ParseEtcdElectionBlock(*fields, node, path, kind, cluster);
    // file_sd may supply every member: the check for an empty list waits for its targets.
    ParseMembers(*fields, node, path, kind, discover, cluster);
    if (cluster.file_sd) ResolveFileSd(*fields, path, cluster);
    if (kind == ClusterKind::kRedis) {
      for (MemberSpec& member : cluster.members) {
        member.password_file = cluster.redis.password_file;
        member.password_env = cluster.redis.password_env;
      }
    }
    return cluster;
  }

  // postgres (the default) or patroni.
  Kind ParseKind(const Fields& fields, const std::string& path) {
    const Entry* entry = Optional(fields, "kind");
    if (!entry) return ClusterKind::kPostgres;
    const std::string text = entry->value.IsScalar() ? entry->value.Scalar() : "";
    if (text == "postgres") return ClusterKind::kPostgres;
    if (text == "patroni") return ClusterKind::kPatroni;
    if (text == "redis") return ClusterKind::kRedis;
    if (text == "redis_lease") return ClusterKind::kRedisLease;
    if (text == "k8s_lease") return ClusterKind::kK8sLease;
    if (text == "etcd_election") return ClusterKind::kEtcdElection;
    AddError(entry->Mark(), Join(path, "kind"),
             "expected postgres, patroni, redis, redis_lease, k8s_lease or etcd_election");
    return std::nullopt;
  }

  // Kinds whose members are Redis servers or claim endpoints, never found by discovery.
  static bool ClaimsOnly(Kind kind) {
    return kind == ClusterKind::kRedis || kind == ClusterKind::kRedisLease ||
           kind == ClusterKind::kK8sLease || kind == ClusterKind::kEtcdElection;
  }

  static std::string KindName(Kind kind) {
    if (kind == ClusterKind::kRedis) return "redis";
    if (kind == ClusterKind::kRedisLease) return "redis_lease";
    if (kind == ClusterKind::kK8sLease) return "k8s_lease";
    if (kind == ClusterKind::kEtcdElection) return "etcd_election";
    return "patroni";
  }

  // A key that only a patroni cluster may have: on a postgres cluster it is reported (at the
  // key) and ignored. With an invalid kind the value is still checked.
  const Entry* PatroniOnly(const Fields& fields, const std::string& path, const std::string& key,
                           Kind kind) {
    const Entry* entry = Optional(fields, key);
    if (entry && kind.has_value() && *kind != ClusterKind::kPatroni) {
      AddError(entry->key.Mark(), Join(path, key), kPatroniOnly);
      return nullptr;
    }
    return entry;
  }

  void ParseTimings(const Fields& fields, const std::string& path, ClusterSpec& cluster) {
    const Timing ttl = Duration(fields, path, "ttl", kMinTtl);
    Timing interval = Duration(fields, path, "probe_interval", kMinProbeInterval);
    const Timing timeout = Duration(fields, path, "probe_timeout", kMinProbeTimeout);
    if (!ttl.ok) return;
    cluster.ttl = ttl.given.value_or(kDefaultTtl);
    if (interval.ok && interval.given && *interval.given > cluster.ttl / 3) {
      AddError(interval.mark, Join(path, "probe_interval"),
               "probe_interval " + FormatDuration(*interval.given) + " is above ttl/3 (" +
                   FormatDuration(cluster.ttl / 3) + ")");
      interval.ok = false;
    }
    if (!interval.ok) return;
    cluster.probe_interval = interval.given.value_or(cluster.ttl / 10);
    if (timeout.ok && timeout.given && *timeout.given > cluster.probe_interval) {
      AddError(timeout.mark, Join(path, "probe_timeout"),
               "probe_timeout " + FormatDuration(*timeout.given) + " is above probe_interval " +
                   FormatDuration(cluster.probe_interval) +
                   (interval.given ? "" : " (the default, ttl/10)"));
    }
    cluster.probe_timeout =
        timeout.given.value_or(std::min(cluster.probe_interval, kMaxDefaultProbeTimeout));
  }

  void ParseSystemIdentifier(const Entry& entry, const std::string& path, ClusterSpec& cluster) {
    const std::string text = entry.value.IsScalar() ? entry.value.Scalar() : "";
    errno = 0;
    const unsigned long long id = std::strtoull(text.c_str(), nullptr, 10);
    if (text.empty() || !std::all_of(text.begin(), text.end(), IsDigit) || errno == ERANGE) {
      AddError(entry.Mark(), path,
               "expected a system identifier: an unsigned 64-bit decimal number");
      return;
    }
    // Canonical form, so that leading zeros cannot cause a spurious lineage mismatch.
    cluster.system_identifier = std::to_string(id);
  }

  // ---- Patroni: scope, namespace, etcd, discover and discovery.

  // Returns whether members are discovered: nullopt when `discover` was invalid (reported).
  std::optional<bool> ParsePatroniSettings(const Fields& fields, const YAML::Node& node,
                                           const std::string& path, Kind kind,
                                           ClusterSpec& cluster) {
    if (kind == ClusterKind::kPatroni || !kind) cluster.scope = cluster.name;
    if (const Entry* scope = PatroniOnly(fields, path, "scope", kind)) {
      cluster.scope = ValidName(*scope, Join(path, "scope")).value_or("");
    }
    if (const Entry* ns = PatroniOnly(fields, path, "namespace", kind)) {
      ParseNamespace(*ns, Join(path, "namespace"), cluster);
    }
    if (const Entry* etcd = PatroniOnly(fields, path, "etcd", kind)) {
      ParseEtcd(*etcd, Join(path, "etcd"), cluster);
    } else if (kind == ClusterKind::kPatroni) {
      AddError(node.Mark(), Join(path, "etcd"), "required");
    }
    std::optional<bool> discover = false;
    if (const Entry* entry = PatroniOnly(fields, path, "discover", kind)) {
      discover = Bool(*entry, Join(path, "discover"));
      cluster.discovery.enabled = discover.value_or(false);
    }
    if (const Entry* discovery = PatroniOnly(fields, path, "discovery", kind)) {
      ParseDiscovery(*discovery, Join(path, "discovery"), cluster.discovery);
    }
    return discover;
  }

  void ParseNamespace(const Entry& entry, const std::string& path, ClusterSpec& cluster) {
    const std::optional<std::string> text = String(entry, path);
    if (!text) return;
    if (!StartsWith(*text, "/")) {
      AddError(entry.Mark(), path, "expected a path starting with '/'");
      return;
    }
    // Patroni itself treats "/service" and "/service/" alike.
    cluster.dcs_namespace = TrimTrailingSlashes(*text);
  }

  void ParseEtcd(const Entry& entry, const std::string& path, ClusterSpec& cluster) {
    const std::optional<Fields> fields = ReadMapping(entry, path, {"endpoints"});
    if (!fields) return;
    const Entry* endpoints = Required(*fields, entry.value, path, "endpoints");
    if (endpoints) cluster.etcd_endpoints = EtcdEndpoints(*endpoints, Join(path, "endpoints"));
  }

  // A non-empty list of etcd v3 JSON gateway URLs.
  std::vector<std::string> EtcdEndpoints(const Entry& endpoints, const std::string& path) {
    std::vector<std::string> urls;
    if (!NonEmptySequence(endpoints, path, "endpoint")) return urls;
    for (size_t i = 0; i < endpoints.value.size(); ++i) {
      const std::optional<std::string> url =
          HttpUrl(Item(endpoints.value[i]), Index(path, i), true);
      if (url) urls.push_back(*url);
    }
    return urls;
  }

  // Settings for members found in the DCS: their host and port come from there, so the dsn may
  // not set them, and the password must come from a file or the environment.
  void ParseDiscovery(const Entry& entry, const std::string& path, DiscoverySpec& discovery) {
    const std::optional<Fields> fields = ReadMapping(
        entry, path, {"dsn", "password_file", "password_env", "max_members", "expire_after"});
    if (!fields) return;
    PasswordSources(*fields, path, discovery.password_file, discovery.password_env);
    if (const Entry* max = Optional(*fields, "max_members")) {
      discovery.max_members =
          Count(*max, Join(path, "max_members"), 1, 1000).value_or(discovery.max_members);
    }
    const Timing expire = Duration(*fields, path, "expire_after", Millis(1000));
    if (expire.ok && expire.given) discovery.expire_after = *expire.given;
    discovery.dsn = HostlessDsn(Optional(*fields, "dsn"), Join(path, "dsn"),
                                "discovered members take host and port from the DCS");
  }

  // ---- Members.

  void ParseMembers(const Fields& fields, const YAML::Node& node, const std::string& path,
                    Kind kind, std::optional<bool> discover, ClusterSpec& cluster) {
    const Entry* members = Optional(fields, "members");
    const std::string members_path = Join(path, "members");
    if (!members || (members->value.IsSequence() && members->value.size() == 0)) {
      // An invalid discover (reported) waives the check rather than guessing; file_sd may
      // supply every member (checked once its targets are read).
      if (kind != ClusterKind::kPostgres && !ClaimsOnly(kind) && discover.value_or(true)) {
        return;
      }
      if (cluster.file_sd) return;
      const YAML::Mark mark = members ? members->Mark() : node.Mark();
      if (kind == ClusterKind::kPatroni) {
        AddError(mark, members_path, "must list at least one member or set discover: true");
      } else {
        AddError(mark, members_path, members ? "must list at least one member" : "required");
      }
      return;
    }
    if (!Sequence(*members, members_path)) return;
    SeenNames seen_members;
    for (size_t i = 0; i < members->value.size(); ++i) {
      cluster.members.push_back(
          ParseMember(members->value[i], Index(members_path, i), seen_members, kind));
    }
  }

  // ---- Prometheus file_sd inventory.

  void ParseFileSd(const Entry& entry, const std::string& path, Kind kind, ClusterSpec& cluster) {
    const std::optional<Fields> fields =
        ReadMapping(entry, path,
                    {"files", "group_by", "group", "name_label", "port", "patroni_url_label", "dsn",
                     "password_file", "password_env"});
    if (!fields) return;
    FileSdSpec spec;
    if (const Entry* files = Required(*fields, entry.value, path, "files")) {
      const std::string files_path = Join(path, "files");
      if (NonEmptySequence(*files, files_path, "file")) {
        for (size_t i = 0; i < files->value.size(); ++i) {
          auto file = String(Item(files->value[i]), Index(files_path, i));
          if (file && !file->empty()) spec.files.push_back(*file);
        }
      }
    }
    auto label = [&](const char* key, bool required) {
      const Entry* e =
          required ? Required(*fields, entry.value, path, key) : Optional(*fields, key);
      if (!e) return std::string();
      std::optional<std::string> value = String(*e, Join(path, key));
      if (value && !IsLabelName(*value)) {
        AddError(e->Mark(), Join(path, key),
                 "expected a label name matching [a-zA-Z_][a-zA-Z0-9_]*");
        return std::string();
      }
      return value.value_or("");
    };
    spec.group_by = label("group_by", true);
    spec.name_label = label("name_label", false);
    if (const Entry* group = Optional(*fields, "group")) {
      spec.group = String(*group, Join(path, "group")).value_or("");
    } else {
      spec.group = cluster.name;
    }
    if (const Entry* port = Optional(*fields, "port")) {
      const std::string text = port->value.IsScalar() ? port->value.Scalar() : "";
      const long value =
          std::all_of(text.begin(), text.end(), IsDigit) && !text.empty() && text.size() <= 5
              ? std::stol(text)
              : 0;
      if (value < 1 || value > 65535) {
        AddError(port->Mark(), Join(path, "port"), "expected a port number (1-65535)");
      } else {
        spec.port = text;
      }
    }
    if (PatroniOnly(*fields, path, "patroni_url_label", kind)) {
      spec.patroni_url_label = label("patroni_url_label", false);
    }
    PasswordSources(*fields, path, spec.password_file, spec.password_env);
    spec.dsn = HostlessDsn(Optional(*fields, "dsn"), Join(path, "dsn"),
                           "file_sd members take host and port from their targets");
    if (!Optional(*fields, "dsn")) AddError(entry.Mark(), Join(path, "dsn"), "required");
    cluster.file_sd = std::move(spec);
  }

  // Reads the target files now; their own errors carry their own file, line and column.
  void ResolveFileSd(const Fields& fields, const std::string& path, ClusterSpec& cluster) {
    const FileSdSpec& spec = *cluster.file_sd;
    for (const auto& pattern : spec.files) watched_globs_.push_back(pattern);
    FileSdTargets found = ReadFileSdTargets(spec.files);
    for (auto& error : found.errors) errors().push_back(std::move(error));
    SeenNames seen;
    for (const auto& member : cluster.members) seen.emplace(member.name, 0);
    size_t matched = 0;
    for (const FileSdTarget& target : found.targets) {
      auto group = target.labels.find(spec.group_by);
      if (group == target.labels.end() || group->second != spec.group) continue;
      ++matched;
      const YAML::Mark mark = target.mark;
      auto fail = [&](const std::string& message) {
        errors().push_back({target.file, mark.line + 1, mark.column + 1, "targets", message});
      };
      MemberSpec member;
      member.name = target.address;
      if (!spec.name_label.empty()) {
        auto name = target.labels.find(spec.name_label);
        if (name == target.labels.end() || name->second.empty()) {
          fail("target " + target.address + " has no label " + spec.name_label);
          continue;
        }
        member.name = name->second;
      }
      if (!seen.emplace(member.name, 0).second) {
        fail("member " + member.name + " is listed twice in cluster " + cluster.name);
        continue;
      }
      HostPort at = SplitHostPort(target.address);
      if (!spec.port.empty()) at.port = spec.port;
      if (at.host.empty() || at.port.empty() ||
          !std::all_of(at.port.begin(), at.port.end(), IsDigit)) {
        fail("target " + target.address + " is not host:port");
        continue;
      }
      member =
          MemberAt(std::move(member.name), at, spec.dsn, spec.password_file, spec.password_env);
      if (!spec.patroni_url_label.empty()) {
        auto url = target.labels.find(spec.patroni_url_label);
        if (url != target.labels.end() && IsHttpUrl(url->second)) {
          member.patroni_url = TrimTrailingSlashes(url->second);
        }
      }
      cluster.members.push_back(std::move(member));
    }
    if (matched == 0 && cluster.members.empty() && !cluster.discovery.enabled) {
      AddError(
          fields.at("file_sd").Mark(), Join(path, "file_sd"),
          "no target has " + spec.group_by + "=\"" + spec.group + "\" and no member is listed");
    }
  }

  // ---- Redis: the Sentinel group, the login, and members by address.

  void ParseRedisBlock(const Fields& fields, const YAML::Node& node, const std::string& path,
                       Kind kind, ClusterSpec& cluster) {
    const Entry* entry = Optional(fields, "redis");
    if (entry && kind.has_value() && *kind != ClusterKind::kRedis) {
      AddError(entry->key.Mark(), Join(path, "redis"), "only valid for kind: redis");
      return;
    }
    if (!entry) {
      if (kind == ClusterKind::kRedis) AddError(node.Mark(), Join(path, "redis"), "required");
      return;
    }
    const std::string block = Join(path, "redis");
    const std::optional<Fields> redis =
        ReadMapping(*entry, block,
                    {"master_name", "sentinels", "username", "password_file", "password_env",
                     "sentinel_username", "sentinel_password_file", "sentinel_password_env", "tls",
                     "tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_name"});
    if (!redis) return;
    RedisSpec& spec = cluster.redis;
    if (const Entry* name = Required(*redis, entry->value, block, "master_name")) {
      spec.master_name = ValidName(*name, Join(block, "master_name")).value_or("");
    }
    const Entry* sentinels = Required(*redis, entry->value, block, "sentinels");
    const std::string list = Join(block, "sentinels");
    if (sentinels && NonEmptySequence(*sentinels, list, "sentinel")) {
      for (size_t i = 0; i < sentinels->value.size(); ++i) {
        spec.sentinels.push_back(
            RedisAddress(Item(sentinels->value[i]), Index(list, i)).value_or(""));
      }
    }
    if (const Entry* user = Optional(*redis, "username")) {
      spec.username = ValidName(*user, Join(block, "username")).value_or("");
    }
    PasswordSources(*redis, block, spec.password_file, spec.password_env);
    if (const Entry* user = Optional(*redis, "sentinel_username")) {
      spec.sentinel_username = ValidName(*user, Join(block, "sentinel_username")).value_or("");
    }
    PasswordSources(*redis, block, spec.sentinel_password_file, spec.sentinel_password_env,
                    "sentinel_");
    ParseRedisTls(*redis, entry->value, block, spec);
  }

  // `tls: true` with its CA file, an optional client certificate and key, and a server name;
  // the tls_* keys without `tls: true` would be silently unused, so they are errors.
  void ParseRedisTls(const Fields& redis, const YAML::Node& node, const std::string& block,
                     RedisSpec& spec) {
    const Entry* tls = Optional(redis, "tls");
    const bool on = tls != nullptr && Bool(*tls, Join(block, "tls")).value_or(false);
    const char* const keys[] = {"tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_name"};
    if (!on) {
      for (const char* key : keys) {
        if (const Entry* unused = Optional(redis, key)) {
          AddError(unused->key.Mark(), Join(block, key), "only valid with tls: true");
        }
      }
      return;
    }
    RedisTlsSpec& out = spec.tls.emplace();
    if (const Entry* ca = Required(redis, node, block, "tls_ca_file")) {
      out.ca_file = String(*ca, Join(block, "tls_ca_file")).value_or("");
    }
    const Entry* cert = Optional(redis, "tls_cert_file");
    const Entry* key = Optional(redis, "tls_key_file");
    if (cert) out.cert_file = String(*cert, Join(block, "tls_cert_file")).value_or("");
    if (key) out.key_file = String(*key, Join(block, "tls_key_file")).value_or("");
    if ((cert == nullptr) != (key == nullptr)) {
      const Entry* given = cert != nullptr ? cert : key;
      AddError(given->key.Mark(), Join(block, cert != nullptr ? "tls_cert_file" : "tls_key_file"),
               "tls_cert_file and tls_key_file go together");
    }
    if (const Entry* name = Optional(redis, "tls_server_name")) {
      out.server_name = String(*name, Join(block, "tls_server_name")).value_or("");
    }
  }

  // host:port of a Redis server or sentinel, with a port in 1-65535.
  std::optional<std::string> RedisAddress(const Entry& entry, const std::string& path) {
    const std::optional<std::string> text = String(entry, path);
    if (!text) return std::nullopt;
    const HostPort at = SplitHostPort(*text, "");
    const bool digits = !at.port.empty() && at.port.size() <= 5 &&
                        std::all_of(at.port.begin(), at.port.end(), IsDigit);
    const long port = digits ? std::stol(at.port) : 0;
    if (at.host.empty() || port < 1 || port > 65535 ||
        at.host.find_first_of(" \t\r\n/") != std::string::npos) {
      AddError(entry.Mark(), path, "expected host:port");
      return std::nullopt;
    }
    return *text;
  }

  MemberSpec ParseRedisMember(const YAML::Node& node, const std::string& path, SeenNames& seen) {
    MemberSpec member;
    const std::optional<Fields> fields = ReadMapping(node, path, {"name", "address"});
    if (!fields) return member;
    if (const Entry* name = Required(*fields, node, path, "name")) {
      member.name = Name(*name, Join(path, "name"), seen, "member").value_or("");
    }
    if (const Entry* address = Required(*fields, node, path, "address")) {
      member.address = RedisAddress(*address, Join(path, "address")).value_or("");
    }
    return member;
  }

  // ---- Application leases: the key, the login, the claim query, candidates by metrics URL.

  void ParseRedisLeaseBlock(const Fields& fields, const YAML::Node& node, const std::string& path,
                            Kind kind, ClusterSpec& cluster) {
    const Entry* entry = Optional(fields, "redis_lease");
    if (entry && kind.has_value() && *kind != ClusterKind::kRedisLease) {
      AddError(entry->key.Mark(), Join(path, "redis_lease"), "only valid for kind: redis_lease");
      return;
    }
    if (!entry) {
      if (kind == ClusterKind::kRedisLease) {
        AddError(node.Mark(), Join(path, "redis_lease"), "required");
      }
      return;
    }
    const std::string block = Join(path, "redis_lease");
    const std::optional<Fields> lease =
        ReadMapping(*entry, block,
                    {"address", "username", "password_file", "password_env", "key", "pattern",
                     "max_keys", "max_scan_iterations", "claim"});
    if (!lease) return;
    RedisLeaseSpec& spec = cluster.redis_lease;
    spec.lock = cluster.name;
    if (const Entry* address = Required(*lease, entry->value, block, "address")) {
      spec.address = RedisAddress(*address, Join(block, "address")).value_or("");
    }
    if (const Entry* user = Optional(*lease, "username")) {
      spec.username = ValidName(*user, Join(block, "username")).value_or("");
    }
    PasswordSources(*lease, block, spec.password_file, spec.password_env);
    ParseLeaseKeys(*lease, *entry, block, spec);
    if (const Entry* claim = Optional(*lease, "claim")) {
      ParseClaimQuery(*claim, Join(block, "claim"), spec);
    }
  }

  // key or pattern (exactly one), and the SCAN caps, which only a pattern uses.
  void ParseLeaseKeys(const Fields& lease, const Entry& entry, const std::string& block,
                      RedisLeaseSpec& spec) {
    const Entry* key = Optional(lease, "key");
    const Entry* pattern = Optional(lease, "pattern");
    if (key && pattern) {
      AddError(pattern->key.Mark(), Join(block, "pattern"),
               "only one of key and pattern may be set");
    } else if (!key && !pattern) {
      AddError(entry.Mark(), Join(block, "key"), "required (or pattern)");
    }
    auto text = [&](const Entry* e, const char* name) {
      const std::string at = Join(block, name);
      std::optional<std::string> value = String(*e, at);
      if (value && (value->empty() || value->size() > kMaxLeaseKeyBytes)) {
        AddError(e->Mark(), at, "expected 1 to " + std::to_string(kMaxLeaseKeyBytes) + " bytes");
        return std::string();
      }
      return value.value_or("");
    };
    if (key) spec.key = text(key, "key");
    if (pattern) spec.pattern = text(pattern, "pattern");
    for (const char* cap : {"max_keys", "max_scan_iterations"}) {
      const Entry* e = Optional(lease, cap);
      if (!e) continue;
      if (!pattern) {
        AddError(e->key.Mark(), Join(block, cap), "only valid with pattern");
        continue;
      }
      const auto n = Count(*e, Join(block, cap), 1, 100000);
      int& field = std::string(cap) == "max_keys" ? spec.max_keys : spec.max_scan_iterations;
      field = n.value_or(field);
    }
  }

  // The claim's metric, the label naming the lock and its value, and the token's label.
  // Also the resource witness's query (`witness`): its url instead of a token label.
  template <typename Spec>
  std::optional<Fields> ParseClaimQuery(const Entry& entry, const std::string& path, Spec& spec,
                                        bool witness = false) {
    const std::optional<Fields> claim =
        witness ? ReadMapping(entry, path, {"url", "metric", "lock_label", "lock"})
                : ReadMapping(entry, path, {"metric", "lock_label", "lock", "token_label"});
    if (!claim) return claim;
    auto label = [&](const char* key, bool metric, std::string& field) {
      const Entry* e = Optional(*claim, key);
      if (!e) return;
      const std::optional<std::string> value = String(*e, Join(path, key));
      if (!value) return;
      if (!IsPrometheusName(*value, metric)) {
        AddError(e->Mark(), Join(path, key),
                 metric ? "expected a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"
                        : "expected a label name ([a-zA-Z_][a-zA-Z0-9_]*)");
        return;
      }
      field = *value;
    };
    label("metric", true, spec.claim_metric);
    label("lock_label", false, spec.lock_label);
    label("token_label", false, spec.token_label);
    if (!spec.token_label.empty() && spec.token_label == spec.lock_label) {
      AddError(claim->at("token_label").Mark(), Join(path, "token_label"),
               "must differ from lock_label");
    }
    if (const Entry* lock = Optional(*claim, "lock")) {
      const std::optional<std::string> value = String(*lock, Join(path, "lock"));
      if (value && value->empty()) AddError(lock->Mark(), Join(path, "lock"), "must not be empty");
      if (value && !value->empty()) spec.lock = *value;
    }
    return claim;
  }

  // ---- etcd elections and locks: the gateway, the prefix, the claim query.

  void ParseEtcdElectionBlock(const Fields& fields, const YAML::Node& node, const std::string& path,
                              Kind kind, ClusterSpec& cluster) {
    const std::string block = Join(path, "etcd_election");
    const Entry* entry = Optional(fields, "etcd_election");
    if (entry && kind.has_value() && *kind != ClusterKind::kEtcdElection) {
      AddError(entry->key.Mark(), block, "only valid for kind: etcd_election");
      return;
    }
    if (!entry) {
      if (kind == ClusterKind::kEtcdElection) AddError(node.Mark(), block, "required");
      return;
    }
    const std::optional<Fields> election =
        ReadMapping(*entry, block, {"endpoints", "prefix", "claim", "resource_witness"});
    if (!election) return;
    EtcdElectionSpec& spec = cluster.etcd_election;
    spec.lock = cluster.name;
    if (const Entry* endpoints = Required(*election, entry->value, block, "endpoints")) {
      spec.endpoints = EtcdEndpoints(*endpoints, Join(block, "endpoints"));
    }
    if (const Entry* prefix = Required(*election, entry->value, block, "prefix")) {
      const std::string at = Join(block, "prefix");
      const std::optional<std::string> value = String(*prefix, at);
      if (value && (value->empty() || value->size() > kMaxLeaseKeyBytes)) {
        AddError(prefix->Mark(), at,
                 "expected 1 to " + std::to_string(kMaxLeaseKeyBytes) + " bytes");
      } else if (value) {
        spec.prefix = *value;
      }
    }
    if (const Entry* claim = Optional(*election, "claim")) {
      ParseClaimQuery(*claim, Join(block, "claim"), spec);
    }
    if (const Entry* witness = Optional(*election, "resource_witness")) {
      ParseResourceWitness(*witness, Join(block, "resource_witness"), spec);
    }
  }

  // The resource's own report of the highest token it accepted: a metric, as the claims are,
  // under the same rules (metric and label names, a non-empty lock).
  void ParseResourceWitness(const Entry& entry, const std::string& path, EtcdElectionSpec& spec) {
    EtcdElectionSpec names;
    ResourceWitnessSpec witness;
    names.claim_metric = witness.metric;
    names.lock = spec.lock;
    const std::optional<Fields> fields = ParseClaimQuery(entry, path, names, true);
    if (!fields) return;
    if (const Entry* url = Required(*fields, entry.value, path, "url")) {
      witness.url = HttpUrl(*url, Join(path, "url"), false).value_or("");
    }
    witness.metric = names.claim_metric;
    witness.lock_label = names.lock_label;
    witness.lock = names.lock;
    spec.resource_witness = std::move(witness);
  }

  // ---- Kubernetes Leases: the API server and its credentials, the Lease, the claim query.

  void ParseK8sLeaseBlock(const Fields& fields, const YAML::Node& node, const std::string& path,
                          Kind kind, ClusterSpec& cluster) {
    const Entry* entry = Optional(fields, "k8s_lease");
    if (entry && kind.has_value() && *kind != ClusterKind::kK8sLease) {
      AddError(entry->key.Mark(), Join(path, "k8s_lease"), "only valid for kind: k8s_lease");
      return;
    }
    if (!entry) {
      if (kind == ClusterKind::kK8sLease)
        AddError(node.Mark(), Join(path, "k8s_lease"), "required");
      return;
    }
    const std::string block = Join(path, "k8s_lease");
    const std::optional<Fields> lease = ReadMapping(
        *entry, block,
        {"api_server", "namespace", "lease", "token_file", "ca_file", "kubeconfig", "claim"});
    if (!lease) return;
    K8sLeaseSpec& spec = cluster.k8s_lease;
    spec.lease = cluster.name;
    ParseK8sLeaseSource(*lease, *entry, block, spec);
    for (const char* key : {"namespace", "lease"}) {
      const Entry* e = Optional(*lease, key);
      if (!e) continue;
      const std::optional<std::string> value = ValidName(*e, Join(block, key));
      if (value) (std::string(key) == "lease" ? spec.lease : spec.lease_namespace) = *value;
    }
    spec.lock = spec.lease;
    if (const Entry* claim = Optional(*lease, "claim")) {
      ParseClaimQuery(*claim, Join(block, "claim"), spec);
    }
  }

  // api_server (with token_file and ca_file, a service account's by default) or kubeconfig.
  void ParseK8sLeaseSource(const Fields& lease, const Entry& entry, const std::string& block,
                           K8sLeaseSpec& spec) {
    const Entry* server = Optional(lease, "api_server");
    const Entry* kubeconfig = Optional(lease, "kubeconfig");
    if (server && kubeconfig) {
      AddError(kubeconfig->key.Mark(), Join(block, "kubeconfig"),
               "only one of api_server and kubeconfig may be set");
    } else if (!server && !kubeconfig) {
      AddError(entry.Mark(), Join(block, "api_server"), "required (or kubeconfig)");
    }
    if (server) {
      spec.api_server = HttpUrl(*server, Join(block, "api_server"), true).value_or("");
      if (!spec.api_server.empty() && !StartsWith(spec.api_server, "https://")) {
        AddError(server->Mark(), Join(block, "api_server"), "expected an https:// URL");
      }
      spec.token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
      spec.ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
    }
    for (const char* key : {"token_file", "ca_file", "kubeconfig"}) {
      const Entry* e = Optional(lease, key);
      if (!e) continue;
      if (kubeconfig && std::string(key) != "kubeconfig") {
        AddError(e->key.Mark(), Join(block, key), "not valid with kubeconfig (it names its own)");
        continue;
      }
      const std::optional<std::string> value = String(*e, Join(block, key));
      if (value && value->empty()) AddError(e->Mark(), Join(block, key), "expected a path");
      if (!value || value->empty()) continue;
      const std::string name = key;
      (name == "token_file" ? spec.token_file
       : name == "ca_file"  ? spec.ca_file
                            : spec.kubeconfig) = *value;
    }
  }

  MemberSpec ParseLeaseMember(const YAML::Node& node, const std::string& path, SeenNames& seen) {
    MemberSpec member;
    const std::optional<Fields> fields =
        ReadMapping(node, path, {"name", "metrics_url", "identity"});
    if (!fields) return member;
    if (const Entry* name = Required(*fields, node, path, "name")) {
      member.name = Name(*name, Join(path, "name"), seen, "member").value_or("");
    }
    if (const Entry* url = Required(*fields, node, path, "metrics_url")) {
      member.claim_url = HttpUrl(*url, Join(path, "metrics_url"), false).value_or("");
      member.address = member.claim_url;
    }
    if (const Entry* identity = Optional(*fields, "identity")) {
      const std::optional<std::string> value = String(*identity, Join(path, "identity"));
      if (value && (value->empty() || value->size() > kMaxLeaseKeyBytes)) {
        AddError(identity->Mark(), Join(path, "identity"),
                 "expected 1 to " + std::to_string(kMaxLeaseKeyBytes) + " bytes");
      } else if (value) {
        member.lease_identity = *value;
      }
    }
    return member;
  }

  MemberSpec ParseMember(const YAML::Node& node, const std::string& path, SeenNames& seen,
                         Kind kind) {
    if (kind == ClusterKind::kRedis) return ParseRedisMember(node, path, seen);
    if (kind == ClusterKind::kRedisLease || kind == ClusterKind::kK8sLease ||
        kind == ClusterKind::kEtcdElection) {
      return ParseLeaseMember(node, path, seen);
    }
    MemberSpec member;
    const std::optional<Fields> fields =
        ReadMapping(node, path, {"name", "dsn", "password_file", "password_env", "patroni_url"});
    if (!fields) return member;
    if (const Entry* name = Required(*fields, node, path, "name")) {
      member.name = Name(*name, Join(path, "name"), seen, "member").value_or("");
    }
    if (const Entry* url = PatroniOnly(*fields, path, "patroni_url", kind)) {
      member.patroni_url = HttpUrl(*url, Join(path, "patroni_url"), true).value_or("");
    }
    PasswordSources(*fields, path, member.password_file, member.password_env);
    const Entry* dsn = Required(*fields, node, path, "dsn");
    std::optional<ParsedDsn> parsed = dsn ? Dsn(*dsn, Join(path, "dsn")) : std::nullopt;
    if (!parsed) return member;
    member.dsn = std::move(parsed->dsn);
    member.address = std::move(parsed->address);
    member.inline_password = std::move(parsed->password);
    for (const char* key : {"password_file", "password_env"}) {
      const Entry* source = Optional(*fields, key);
      if (member.inline_password && source) {
        AddError(source->Mark(), Join(path, key),
                 std::string("password given both inline in dsn and in ") + key);
      }
    }
    return member;
  }

  // ---- Suppressions.

  void ParseSuppressions(const Entry& entry, const std::string& path) {
    const std::optional<Fields> fields = ReadMapping(
        entry, path,
        {"max_duration", "dropin_dir", "state_file", "declarations", "alertmanager_silences"});
    if (!fields) return;
    if (const Entry* silences = Optional(*fields, "alertmanager_silences")) {
      ParseAlertmanagerSilences(*silences, Join(path, "alertmanager_silences"));
    }
    const Timing max = Duration(*fields, path, "max_duration", Millis(60000));
    if (max.ok && max.given) suppressions_.max_duration = *max.given;
    for (const char* key : {"dropin_dir", "state_file"}) {
      const Entry* e = Optional(*fields, key);
      if (!e) continue;
      std::optional<std::string> value = String(*e, Join(path, key));
      if (value && value->empty()) AddError(e->Mark(), Join(path, key), "expected a path");
      (std::string(key) == "dropin_dir" ? suppressions_.dropin_dir : suppressions_.state_file) =
          value.value_or("");
    }
    const Entry* declarations = Optional(*fields, "declarations");
    if (!declarations || !Sequence(*declarations, Join(path, "declarations"))) return;
    DeclarationRules rules;
    rules.max_duration = suppressions_.max_duration;
    rules.now = std::chrono::system_clock::now();
    // A config outlives its declarations: an expired one is kept (shown as expired), not fatal.
    rules.allow_expired = true;
    for (size_t i = 0; i < declarations->value.size(); ++i) {
      const std::string item_path = Index(Join(path, "declarations"), i);
      auto parsed = ParseDeclaration(declarations->value[i], file(), item_path, rules);
      if (auto* found = std::get_if<std::vector<ConfigError>>(&parsed)) {
        for (auto& error : *found) errors().push_back(std::move(error));
        continue;
      }
      Declaration d = std::get<Declaration>(std::move(parsed));
      d.id = "config-" + std::to_string(i);
      d.source = "config";
      d.origin = file();
      if (d.author.empty()) d.author = "config";
      suppressions_.declarations.push_back(std::move(d));
    }
  }

  // Declarations read from Alertmanager silences; by default from alerting.alertmanagers,
  // which ParseRoot reads first.
  void ParseAlertmanagerSilences(const Entry& entry, const std::string& path) {
    const std::optional<Fields> fields =
        ReadMapping(entry, path, {"enabled", "alertmanagers", "refresh_interval", "timeout"});
    if (!fields) return;
    AlertmanagerSilencesSpec& spec = suppressions_.alertmanager_silences;
    // The block itself turns the source on; `enabled: false` keeps it written but off.
    const Entry* enabled = Optional(*fields, "enabled");
    spec.enabled = !enabled || Bool(*enabled, Join(path, "enabled")).value_or(false);
    if (const Entry* alertmanagers = Optional(*fields, "alertmanagers")) {
      ParseAlertmanagers(*alertmanagers, Join(path, "alertmanagers"), spec.alertmanager_urls);
    } else {
      spec.alertmanager_urls = alerting_.alertmanager_urls;
    }
    const Timing refresh = Duration(*fields, path, "refresh_interval", kMinSilenceRefresh);
    const Timing timeout = Duration(*fields, path, "timeout", kMinSilenceTimeout);
    if (refresh.ok && refresh.given) spec.refresh_interval = *refresh.given;
    if (timeout.ok && timeout.given) spec.timeout = *timeout.given;
    if (refresh.ok && timeout.ok && spec.timeout > spec.refresh_interval) {
      AddError(timeout.given ? timeout.mark : refresh.mark,
               Join(path, timeout.given ? "timeout" : "refresh_interval"),
               "timeout " + FormatDuration(spec.timeout) + " is above refresh_interval " +
                   FormatDuration(spec.refresh_interval));
    }
    if (spec.enabled && spec.alertmanager_urls.empty() && !Optional(*fields, "alertmanagers")) {
      AddError(entry.Mark(), path,
               "no Alertmanager to read silences from: list alertmanagers here or under "
               "alerting.alertmanagers");
    }
  }

  // The SplitBrain page's labels per cluster, for telling when a silence hides it.
  void CollectPageLabels() {
    for (const auto& cluster : clusters_) {
      std::map<std::string, std::string> labels(alerting_.external_labels.begin(),
                                                alerting_.external_labels.end());
      labels["alertname"] = "SplitBrain";
      labels["severity"] = "critical";
      labels["cluster"] = cluster.name;
      if (!cluster.scope.empty()) labels["scope"] = cluster.scope;
      suppressions_.alertmanager_silences.page_labels.push_back(std::move(labels));
    }
  }

  // ---- Incident log.

  void ParseIncidentLog(const Entry& entry, const std::string& path) {
    const std::optional<Fields> fields =
        ReadMapping(entry, path, {"file", "retention", "max_events"});
    if (!fields) return;
    if (const Entry* file = Optional(*fields, "file")) {
      std::optional<std::string> value = String(*file, Join(path, "file"));
      if (value && value->empty()) AddError(file->Mark(), Join(path, "file"), "expected a path");
      incident_log_.file = value.value_or("");
    }
    const Timing retention = Duration(*fields, path, "retention", kMinIncidentRetention);
    if (retention.ok && retention.given) incident_log_.retention = *retention.given;
    if (const Entry* max = Optional(*fields, "max_events")) {
      incident_log_.max_events = Count(*max, Join(path, "max_events"), 1, kMaxIncidentEvents)
                                     .value_or(incident_log_.max_events);
    }
  }

  // ---- Alerting.

  void ParseAlerting(const Entry& entry, const std::string& path) {
    const std::optional<Fields> fields =
        ReadMapping(entry, path,
                    {"alertmanagers", "resend_interval", "timeout", "external_url",
                     "runbook_base_url", "external_labels"});
    if (!fields) return;
    if (const Entry* alertmanagers = Optional(*fields, "alertmanagers")) {
      ParseAlertmanagers(*alertmanagers, Join(path, "alertmanagers"), alerting_.alertmanager_urls);
    }
    const Timing resend = Duration(*fields, path, "resend_interval", kMinResendInterval);
    if (resend.ok && resend.given) alerting_.resend_interval = *resend.given;
    const Timing timeout = Duration(*fields, path, "timeout", kMinAlertTimeout);
    if (timeout.ok && timeout.given) alerting_.timeout = *timeout.given;
    if (const Entry* url = Optional(*fields, "external_url")) {
      alerting_.external_url = HttpUrl(*url, Join(path, "external_url"), true).value_or("");
    }
    // Kept as written: runbook names are appended to it directly.
    if (const Entry* url = Optional(*fields, "runbook_base_url")) {
      alerting_.runbook_base_url =
          HttpUrl(*url, Join(path, "runbook_base_url"), false).value_or("");
    }
    if (const Entry* labels = Optional(*fields, "external_labels")) {
      ParseExternalLabels(*labels, Join(path, "external_labels"));
    }
  }

  void ParseAlertmanagers(const Entry& entry, const std::string& path,
                          std::vector<std::string>& urls) {
    if (!Sequence(entry, path)) return;
    SeenNames seen_urls;
    for (size_t i = 0; i < entry.value.size(); ++i) {
      const YAML::Node& node = entry.value[i];
      const std::string item_path = Index(path, i);
      const std::optional<Fields> fields = ReadMapping(node, item_path, {"url"});
      const Entry* url_entry = fields ? Required(*fields, node, item_path, "url") : nullptr;
      if (!url_entry) continue;
      const std::string url_path = Join(item_path, "url");
      const std::optional<std::string> url = HttpUrl(*url_entry, url_path, true);
      if (!url) continue;
      // The URL is not echoed: it may carry basic-auth credentials.
      const auto [first, inserted] = seen_urls.emplace(*url, url_entry->Mark().line + 1);
      if (!inserted) {
        AddError(url_entry->Mark(), url_path,
                 "duplicate url (first at line " + std::to_string(first->second) + ")");
        continue;
      }
      urls.push_back(*url);
    }
  }

  void ParseExternalLabels(const Entry& entry, const std::string& path) {
    if (!entry.value.IsMap()) {
      AddError(entry.Mark(), path, "expected a mapping");
      return;
    }
    SeenNames seen;
    for (const auto& kv : entry.value) {
      const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      const std::string label_path = Join(path, name);
      const YAML::Mark mark = kv.first.Mark();
      if (!IsLabelName(name)) {
        AddError(mark, label_path, "expected a label name matching [a-zA-Z_][a-zA-Z0-9_]*");
        continue;
      }
      if (StartsWith(name, "__")) {
        AddError(mark, label_path, "reserved: names starting with __ are for internal use");
        continue;
      }
      if (std::find(std::begin(kReservedLabels), std::end(kReservedLabels), name) !=
          std::end(kReservedLabels)) {
        AddError(mark, label_path,
                 "reserved: the detector sets alertname, severity, cluster and scope itself");
        continue;
      }
      const auto [first, inserted] = seen.emplace(name, mark.line + 1);
      if (!inserted) {
        AddError(mark, label_path,
                 "duplicate key (first at line " + std::to_string(first->second) + ")");
        continue;
      }
      const Entry label{kv.first, kv.second};
      const std::optional<std::string> value = String(label, label_path);
      if (!value) continue;
      // Prometheus drops empty labels, so one here would differ between the two alert paths.
      if (value->empty()) {
        AddError(label.Mark(), label_path, "expected a non-empty string");
        continue;
      }
      alerting_.external_labels.emplace_back(name, *value);
    }
  }

  std::vector<ClusterSpec> clusters_;
  AlertingSpec alerting_;
  SuppressionsSpec suppressions_;
  IncidentLogSpec incident_log_;
  std::vector<std::string> watched_globs_;
};

std::string QuoteConninfoValue(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

HostPort SplitHostPort(const std::string& authority, const std::string& default_port) {
  HostPort out{authority, default_port};
  // The last ':' separates the port unless it sits inside an IPv6 address's brackets.
  if (const auto colon = authority.rfind(':');
      colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
    out.host = authority.substr(0, colon);
    out.port = authority.substr(colon + 1);
  }
  if (out.host.size() > 2 && out.host.front() == '[') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  return out;
}

MemberSpec MemberAt(std::string name, const HostPort& at, const std::string& hostless_dsn,
                    const std::optional<std::string>& password_file,
                    const std::optional<std::string>& password_env) {
  MemberSpec member;
  member.name = std::move(name);
  member.dsn = "host=" + QuoteConninfoValue(at.host) + " port=" + QuoteConninfoValue(at.port) +
               " " + hostless_dsn;
  member.address = at.host + ":" + at.port;
  member.password_file = password_file;
  member.password_env = password_env;
  return member;
}

std::string ConfigError::ToString() const {
  std::string out = file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  if (!key.empty()) out += key + ": ";
  return out + message;
}

ConfigResult LoadConfig(const std::string& path) {
  ReadResult text = ReadFile(path);
  if (const auto* error = std::get_if<std::error_code>(&text)) {
    return std::vector<ConfigError>{{path, 0, 0, "", "cannot read file: " + error->message()}};
  }
  return ParseConfig(std::get<std::string>(text), path);
}

ConfigResult ParseConfig(const std::string& yaml_text, const std::string& file) {
  return ConfigParser(file).Parse(yaml_text);
}

std::variant<std::optional<std::string>, std::string> ResolvePassword(const MemberSpec& member) {
  using Result = std::variant<std::optional<std::string>, std::string>;
  if (member.password_file) {
    ReadResult content = ReadFile(*member.password_file);
    if (const auto* error = std::get_if<std::error_code>(&content)) {
      return Result(std::in_place_index<1>,
                    "cannot read password_file " + *member.password_file + ": " + error->message());
    }
    std::string password = std::move(std::get<std::string>(content));
    if (!password.empty() && password.back() == '\n') {
      password.pop_back();
      if (!password.empty() && password.back() == '\r') password.pop_back();
    }
    return Result(std::in_place_index<0>, std::move(password));
  }
  if (member.password_env) {
    const char* value = std::getenv(member.password_env->c_str());
    if (!value) {
      return Result(std::in_place_index<1>,
                    "environment variable " + *member.password_env + " is not set");
    }
    return Result(std::in_place_index<0>, std::string(value));
  }
  return Result(std::in_place_index<0>, member.inline_password);
}

}  // namespace sbd
