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
#include "detector/config/kinds/kinds.h"

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
    config.remediation_limits_ = remediation_limits_;
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
    const std::optional<Fields> fields = ReadMapping(
        root, "", {"clusters", "alerting", "suppressions", "incident_log", "remediation"});
    if (!fields) return;
    if (const Entry* alerting = Optional(*fields, "alerting")) ParseAlerting(*alerting, "alerting");
    if (const Entry* suppressions = Optional(*fields, "suppressions")) {
      ParseSuppressions(*suppressions, "suppressions");
    }
    if (const Entry* incidents = Optional(*fields, "incident_log")) {
      ParseIncidentLog(*incidents, "incident_log");
    }
    if (const Entry* remediation = Optional(*fields, "remediation")) {
      ParseRemediationLimits(*this, *remediation, "remediation", remediation_limits_);
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
    const std::optional<Fields> fields = ReadMapping(node, path, ClusterKeys());
    if (!fields) return cluster;
    if (const Entry* name = Required(*fields, node, path, "name")) {
      cluster.name = Name(*name, Join(path, "name"), seen, "cluster").value_or("");
    }
    ClusterContext context{node, path, *fields, ParseKind(*fields, path), false, {}};
    cluster.kind = (context.kind ? *context.kind : Kinds().front()).name;
    ParseTimings(*fields, path, cluster);
    if (const Entry* watch = Optional(*fields, "watch")) {
      cluster.watch = Bool(*watch, Join(path, "watch")).value_or(true);
    }
    if (const Entry* id = Optional(*fields, "system_identifier")) {
      ParseSystemIdentifier(*id, Join(path, "system_identifier"), cluster);
    }
    ParseKinds(context, cluster, false);
    const KindConfig* kind = context.kind;
    if (const Entry* file_sd = Optional(*fields, "file_sd"); file_sd && kind && kind->claims_only) {
      AddError(file_sd->key.Mark(), Join(path, "file_sd"),
               std::string("not supported for kind: ") + kind->name + " yet");
    } else if (file_sd) {
      ParseFileSd(*file_sd, Join(path, "file_sd"), kind, cluster);
    }
    ParseKinds(context, cluster, true);
    // file_sd may supply every member: the check for an empty list waits for its targets.
    ParseMembers(context, cluster);
    if (cluster.file_sd) ResolveFileSd(*fields, path, cluster);
    if (const Entry* remediation = Optional(*fields, "remediation")) {
      ParseClusterRemediation(*this, *remediation, Join(path, "remediation"), kind, cluster);
    }
    return cluster;
  }

  // The keys every cluster may have, and each kind's own.
  static const std::vector<std::string>& ClusterKeys() {
    static const std::vector<std::string> keys = [] {
      std::vector<std::string> out = {
          "name",    "kind",    "ttl",   "probe_interval", "probe_timeout", "system_identifier",
          "members", "file_sd", "watch", "remediation"};
      for (const KindConfig& kind : Kinds()) {
        if (kind.block) out.push_back(kind.block);
        out.insert(out.end(), kind.keys.begin(), kind.keys.end());
      }
      return out;
    }();
    return keys;
  }

  // One of the kinds' names (postgres by default); nullptr when invalid (reported), in which
  // case the checks that depend on the kind are skipped rather than piled on.
  const KindConfig* ParseKind(const Fields& fields, const std::string& path) {
    const Entry* entry = Optional(fields, "kind");
    if (!entry) return &Kinds().front();
    const KindConfig* kind = FindKind(entry->value.IsScalar() ? entry->value.Scalar() : "");
    if (!kind) AddError(entry->Mark(), Join(path, "kind"), "expected " + KindNames());
    return kind;
  }

  // Kinds share some keys (discover, discovery): a key of other kinds is reported once, by the
  // first of them, and not at all when the cluster's own kind has it too.
  static bool FirstForeignKind(const KindConfig& kind, const std::string& key,
                               const KindConfig* own) {
    auto has = [&](const KindConfig& k) {
      return std::find(k.keys.begin(), k.keys.end(), key) != k.keys.end();
    };
    if (own && has(*own)) return false;
    for (const KindConfig& k : Kinds()) {
      if (has(k)) return &k == &kind;
    }
    return true;  // a block: only its kind has it
  }

  static std::string KindsWithKey(const std::string& key) {
    std::vector<std::string> names;
    for (const KindConfig& k : Kinds()) {
      if (std::find(k.keys.begin(), k.keys.end(), key) != k.keys.end() ||
          (k.block && key == k.block)) {
        names.push_back(k.name);
      }
    }
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) {
      if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
      out += names[i];
    }
    return out;
  }

  // Each kind's keys (`blocks` false: Patroni's) or blocks (true), read by the cluster's kind,
  // or by every kind when `kind` was invalid. A key of another kind is reported (at the key)
  // and ignored.
  void ParseKinds(ClusterContext& context, ClusterSpec& cluster, bool blocks) {
    for (const KindConfig& kind : Kinds()) {
      if ((kind.block != nullptr) != blocks) continue;
      if (!context.kind || context.kind == &kind) {
        if (kind.parse) kind.parse(*this, context, cluster);
        continue;
      }
      std::vector<std::string> keys = kind.keys;
      if (kind.block) keys.insert(keys.begin(), kind.block);
      for (const std::string& key : keys) {
        const Entry* entry = Optional(context.fields, key);
        if (!entry || !FirstForeignKind(kind, key, context.kind)) continue;
        AddError(entry->key.Mark(), Join(context.path, key),
                 "only valid for kind: " + KindsWithKey(key));
      }
    }
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

  // ---- Members.

  void ParseMembers(const ClusterContext& context, ClusterSpec& cluster) {
    const Entry* members = Optional(context.fields, "members");
    const std::string members_path = Join(context.path, "members");
    if (!members || (members->value.IsSequence() && members->value.size() == 0)) {
      // file_sd may supply every member (checked once its targets are read).
      if (context.members_optional || cluster.file_sd) return;
      const YAML::Mark mark = members ? members->Mark() : context.node.Mark();
      if (!context.no_members_error.empty()) {
        AddError(mark, members_path, context.no_members_error);
      } else {
        AddError(mark, members_path, members ? "must list at least one member" : "required");
      }
      return;
    }
    if (!Sequence(*members, members_path)) return;
    // With an invalid kind, members are read as the default kind's.
    const KindConfig& kind = context.kind ? *context.kind : Kinds().front();
    SeenNames seen_members;
    for (size_t i = 0; i < members->value.size(); ++i) {
      cluster.members.push_back(kind.parse_member(*this, context, cluster, members->value[i],
                                                  Index(members_path, i), seen_members));
    }
  }

  // ---- Prometheus file_sd inventory.

  void ParseFileSd(const Entry& entry, const std::string& path, const KindConfig* kind,
                   ClusterSpec& cluster) {
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
    // Only a kind whose members have a REST API; with an invalid kind the value is still checked.
    const Entry* url_label = Optional(*fields, "patroni_url_label");
    if (url_label && kind && !kind->patroni_urls) {
      AddError(url_label->key.Mark(), Join(path, "patroni_url_label"), kPatroniOnly);
    } else {
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
  RemediationLimits remediation_limits_;
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
