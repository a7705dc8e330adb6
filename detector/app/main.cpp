// splitbrain-detector: tells on-call, within one lease TTL, that two members of a cluster
// are writable at once. See README.md.

#include <signal.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>

#include "detector/alerting/alert_pusher.h"
#include "detector/app/config_watcher.h"
#include "detector/app/declarations_api.h"
#include "detector/app/flags.h"
#include "detector/common/build_info.h"
#include "detector/common/json_text.h"
#include "detector/config/config.h"
#include "detector/engine/scheduler.h"
#include "detector/output/alerts.h"
#include "detector/output/exporter.h"
#include "detector/output/incident_log.h"
#include "detector/output/metrics.h"
#include "detector/output/shard.h"
#include "detector/output/status.h"
#include "detector/remediation/remediator.h"
#include "suppressors/declaration_store.h"

namespace {

using sbd::Flags;
using sbd::kExitConfig;
using sbd::kExitUsage;
using sbd::kUsage;
using sbd::ParseFlags;

// Escapes the message for the JSON log format; spdlog leaves %v raw.
class JsonEscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string escaped =
        sbd::JsonText(nlohmann::json(std::string(msg.payload.data(), msg.payload.size())));
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

void SetUpLogging(const Flags& flags) {
  auto logger = spdlog::stderr_color_mt("splitbrain");
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  if (flags.log_format == "json") {
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        "{\"ts\":\"%Y-%m-%dT%H:%M:%S.%eZ\",\"level\":\"%l\",\"msg\":%*}");
  } else {
    formatter->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%eZ level=%l %v");
  }
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_default_logger(logger);
}

// Errors go to stderr one per line, file:line:column: key: message, and to the log.
std::optional<sbd::ValidatedConfig> Load(const std::string& path) {
  sbd::ConfigResult result = sbd::LoadConfig(path);
  if (auto* errors = std::get_if<std::vector<sbd::ConfigError>>(&result)) {
    for (const auto& e : *errors) std::cerr << e.ToString() << "\n";
    spdlog::error("msg=\"invalid config\" file={} errors={}", path, errors->size());
    return std::nullopt;
  }
  return std::get<sbd::ValidatedConfig>(std::move(result));
}

// The config's suppressions, with the full label set of every page each cluster may send
// taken from the code that builds the alerts, so that the silence check and the alerts
// cannot drift apart.
sbd::SuppressionsSpec SuppressionsOf(const sbd::ValidatedConfig& config) {
  sbd::SuppressionsSpec spec = config.suppressions();
  auto& page_labels = spec.alertmanager_silences.page_labels;
  page_labels.clear();
  for (const auto& cluster : config.clusters()) {
    for (auto& labels : sbd::PageLabelSets(cluster, config.alerting())) {
      page_labels.push_back(std::move(labels));
    }
  }
  return spec;
}

double Now() {
  return std::chrono::duration<double>(sbd::WallClock::now().time_since_epoch()).count();
}

int RunCheck(const sbd::ValidatedConfig& config, const sbd::ShardStatus& shard) {
  sbd::DeclarationStore store(SuppressionsOf(config));
  sbd::Scheduler scheduler(config);
  scheduler.SetDeclarationSource([&](sbd::WallClock::time_point t) { return store.Active(t); });
  scheduler.RunOnce();
  const auto snapshot = scheduler.Snapshot();
  const sbd::DeclarationsView view = store.View();
  std::cout << shard.Text() << sbd::StatusText(snapshot, &view)
            << sbd::IncidentSummaryText(snapshot, config.incident_log());
  // The worst verdict decides (healthy, suppressed, unknown, ... split_brain).
  sbd::Verdict worst = sbd::Verdict::kHealthy;
  for (const auto& cluster : snapshot) worst = std::max(worst, cluster.assessment.verdict);
  return sbd::VerdictExitCode(worst);
}

// The runbooks shipped with this build: the source tree's, else the installed copy.
std::string DefaultRunbooksDir() {
  for (const char* dir : {SBD_SOURCE_RUNBOOKS_DIR, SBD_INSTALLED_RUNBOOKS_DIR}) {
    if (std::filesystem::is_directory(dir)) return dir;
  }
  return "";
}

std::string DefaultExternalUrl(const std::string& listen_address, int port, bool tls) {
  std::string host = listen_address.substr(0, listen_address.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]") {
    char name[256] = {};
    host = gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
  }
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port);
}

// Everything the alert path needs from one config: the pusher and where links point.
struct AlertPath {
  sbd::AlertingSpec spec;
  sbd::AlertLinks links;
  std::unique_ptr<sbd::AlertPusher> pusher;
};

// `reuse` keeps an existing pusher (and so its alerts' startsAt) when only links changed.
std::unique_ptr<AlertPath> MakeAlertPath(const sbd::AlertingSpec& spec,
                                         const std::string& external_url,
                                         std::unique_ptr<sbd::AlertPusher> reuse = nullptr) {
  auto path = std::make_unique<AlertPath>();
  path->spec = spec;
  const std::string base = spec.external_url.empty() ? external_url : spec.external_url;
  path->links.generator_url = base + "/status?format=text";
  path->links.runbook_base_url =
      spec.runbook_base_url.empty() ? base + "/runbooks/" : spec.runbook_base_url;
  if (reuse) {
    path->pusher = std::move(reuse);
  } else if (!spec.alertmanager_urls.empty()) {
    sbd::AlertPusherOptions options;
    options.alertmanager_urls = spec.alertmanager_urls;
    options.timeout = spec.timeout;
    options.resend_interval = spec.resend_interval;
    path->pusher = std::make_unique<sbd::AlertPusher>(options);
  }
  return path;
}

// What the detector's threads share: the HTTP handlers read it, the schedulers' round
// listener pushes through it, and the reload swaps its parts. Members are destroyed in the
// reverse of their order here: the store, the scheduler, and the alert pusher last.
struct DetectorState {
  DetectorState(const sbd::ValidatedConfig& config,
                std::shared_ptr<sbd::ShardStatus> shard_status_in)
      : shard_status(std::move(shard_status_in)) {
    reload_status.last_success_timestamp = Now();
    reload_status.last_attempt_timestamp = Now();
    scheduler = std::make_shared<sbd::Scheduler>(config);
    store = std::make_shared<sbd::DeclarationStore>(SuppressionsOf(config));
    // The incident log keeps the spec it starts with (a reload does not move its file).
    incidents = std::make_shared<sbd::IncidentLog>(config.incident_log());
    incidents->SetClusters(config.clusters());
    remediator = std::make_shared<sbd::Remediator>(config.remediation_limits());
  }

  std::shared_ptr<sbd::Scheduler> Current() {
    std::lock_guard<std::mutex> lock(scheduler_mu);
    return scheduler;
  }

  // A confirmed split brain is handed to the pusher in the round that confirms it.
  void Push(const sbd::ClusterSnapshot& cluster) {
    incidents->ObserveRound(cluster);
    std::lock_guard<std::mutex> lock(alert_mu);
    if (!alert_path->pusher) return;
    alert_path->pusher->Update(cluster.spec.name,
                               sbd::AlertsFor(cluster, alert_path->spec, alert_path->links));
  }

  // Before the scheduler starts: its rounds push alerts and read the active declarations.
  void Attach(sbd::Scheduler& next) {
    next.SetRoundListener([this](const sbd::ClusterSnapshot& cluster) { Push(cluster); });
    next.SetDeclarationSource([this](sbd::WallClock::time_point t) { return store->Active(t); });
    next.SetRemediator(remediator);
  }

  std::unique_ptr<AlertPath> alert_path;
  std::mutex alert_mu;
  // One for the life of the process: its fleet cap and per-incident memory outlive reloads.
  std::shared_ptr<sbd::Remediator> remediator;
  sbd::ConfigReloadStatus reload_status;
  std::mutex scheduler_mu;
  std::shared_ptr<sbd::Scheduler> scheduler;
  // One declaration store for the life of the process, reloaded in place (never swapped).
  std::shared_ptr<sbd::DeclarationStore> store;
  // Every verdict and member state change, for /api/v1/incidents and `check`.
  std::shared_ptr<sbd::IncidentLog> incidents;
  const std::shared_ptr<sbd::ShardStatus> shard_status;
  // Where alerts link to when the config names no external_url; set once the port is known.
  std::string external_url;
};

// False, with every error logged, when --web.config.file does not validate.
bool LoadWebConfigFlag(const Flags& flags, sbd::WebConfig* web) {
  if (flags.web_config_file.empty()) return true;
  auto loaded = sbd::LoadWebConfig(flags.web_config_file);
  if (auto* errors = std::get_if<std::vector<std::string>>(&loaded)) {
    for (const auto& e : *errors) spdlog::error("msg=\"invalid web config\" error=\"{}\"", e);
    return false;
  }
  *web = std::get<sbd::WebConfig>(loaded);
  return true;
}

// Signals are taken synchronously by this thread; every thread started later inherits the
// mask.
sigset_t BlockReloadAndStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGHUP, SIGINT, SIGTERM}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// /metrics, /status, /-/ready, the runbooks and the declarations API, all read from `state`.
sbd::Exporter::Sources ExporterSources(const Flags& flags, DetectorState& state) {
  sbd::Exporter::Sources sources;
  sources.metrics = std::make_shared<sbd::DetectorCollector>(
      [&state] { return state.Current()->Snapshot(); }, &state.reload_status,
      [&state] {
        std::lock_guard<std::mutex> lock(state.alert_mu);
        return state.alert_path && state.alert_path->pusher ? state.alert_path->pusher->Stats()
                                                            : std::vector<sbd::AlertmanagerStats>{};
      },
      [&state] { return state.store->View(); });
  sources.metrics = sbd::WithShardMetrics(sources.metrics, state.shard_status);
  sources.metrics = sbd::WithIncidentLogMetrics(sources.metrics, state.incidents);
  sources.list_incidents =
      [incidents = state.incidents](const std::multimap<std::string, std::string>& query) {
        const auto [status, json] = incidents->HttpGet(query);
        return sbd::Exporter::Sources::Answer{status, json};
      };
  sources.incident_events = [incidents = state.incidents](const std::set<std::string>& clusters) {
    return incidents->EventsOf(clusters);
  };
  sources.status = [&state](bool as_text) {
    const auto snapshot = state.Current()->Snapshot();
    const sbd::DeclarationsView view = state.store->View();
    if (as_text) return state.shard_status->Text() + sbd::StatusText(snapshot, &view);
    nlohmann::json status = sbd::StatusJson(snapshot, &view);
    status["shard"] = state.shard_status->Json();
    return sbd::JsonText(status, 2) + "\n";
  };
  sbd::SetDeclarationsApi(state.store, &sources);
  sources.ready = [&state] { return state.Current()->AllClustersHaveRun(); };
  sources.runbooks_dir = flags.runbooks_dir.empty() ? DefaultRunbooksDir() : flags.runbooks_dir;
  return sources;
}

// Says in the log who may change declarations.
sbd::ExporterOptions ExporterOptionsFor(const Flags& flags, const sbd::WebConfig& web) {
  sbd::ExporterOptions exporter_options;
  exporter_options.allow_unauthenticated_changes = flags.allow_unauthenticated_changes;
  if (flags.allow_unauthenticated_changes) {
    spdlog::warn(
        "msg=\"--web.allow-unauthenticated-changes: anyone who reaches the port can add and "
        "remove declarations, and so turn a split-brain page into a warning\"");
  } else if (web.basic_auth_users.empty()) {
    spdlog::info(
        "msg=\"the declarations API refuses POST and DELETE: no basic_auth_users in "
        "--web.config.file\"");
  }
  return exporter_options;
}

// Clusters that left the config resolve their alerts; a changed alerting section starts a
// new pusher (its alerts are re-sent at once), an unchanged one keeps its pusher.
void UpdateAlertPath(DetectorState& state, const std::vector<sbd::ClusterSnapshot>& old_snapshot,
                     const sbd::ValidatedConfig& share) {
  std::lock_guard<std::mutex> lock(state.alert_mu);
  auto& alert_path = state.alert_path;
  for (const auto& old : old_snapshot) {
    bool kept = false;
    for (const auto& c : share.clusters()) kept = kept || c.name == old.spec.name;
    if (!kept && alert_path->pusher) alert_path->pusher->Update(old.spec.name, {});
  }
  const auto& was = alert_path->spec;
  const auto& now = share.alerting();
  if (was.alertmanager_urls != now.alertmanager_urls || was.timeout != now.timeout ||
      was.resend_interval != now.resend_interval) {
    alert_path = MakeAlertPath(now, state.external_url);
  } else {
    alert_path = MakeAlertPath(now, state.external_url, std::move(alert_path->pusher));
  }
}

// On SIGHUP: re-reads the web config and the config; a new scheduler takes over the old
// one's history. An invalid config is logged and the last good one kept.
void Reload(const Flags& flags, DetectorState& state, sbd::ConfigFileWatcher& watcher,
            sbd::Exporter& exporter) {
  if (!flags.web_config_file.empty()) exporter.ReloadWebConfig(flags.web_config_file);
  state.reload_status.last_attempt_timestamp = Now();
  auto loaded = Load(flags.config_file);
  if (!loaded) {
    state.reload_status.last_successful = false;
    spdlog::error("msg=\"reload failed; keeping the last good config\" file={}", flags.config_file);
    return;
  }
  // From here on the config is this shard's share: clusters of other shards are not run,
  // and those that left the share resolve their alerts.
  const sbd::ValidatedConfig share = sbd::ShardShare(*loaded, state.shard_status->shard());
  auto next = std::make_shared<sbd::Scheduler>(share);
  watcher.SetGlobs(share.watched_globs());
  auto previous = state.Current();
  previous->Stop();
  const auto old_snapshot = previous->Snapshot();
  next->Inherit(old_snapshot);
  UpdateAlertPath(state, old_snapshot, share);
  state.incidents->SetClusters(share.clusters());
  state.remediator->SetLimits(share.remediation_limits());
  state.Attach(*next);
  {
    std::lock_guard<std::mutex> lock(state.scheduler_mu);
    state.scheduler = next;
    // Reloaded in place, with the scheduler's swap: a DELETE or POST answered during the
    // reload is never undone by a store built from the files before it.
    state.store->Reload(SuppressionsOf(share));
  }
  next->Start();
  state.shard_status->SetClusters(share.clusters().size(), loaded->clusters().size());
  state.reload_status.last_successful = true;
  state.reload_status.last_success_timestamp = Now();
  spdlog::info("msg=\"config reloaded\" clusters={} configured_clusters={}",
               share.clusters().size(), loaded->clusters().size());
}

// Returns on SIGINT or SIGTERM; each SIGHUP reloads.
void ReloadUntilStopped(const sigset_t& signals, const Flags& flags, DetectorState& state,
                        sbd::ConfigFileWatcher& watcher, sbd::Exporter& exporter) {
  for (;;) {
    int signal = 0;
    sigwait(&signals, &signal);
    if (signal != SIGHUP) break;
    Reload(flags, state, watcher, exporter);
  }
}

int RunDetector(const Flags& flags, sbd::ValidatedConfig config,
                const std::shared_ptr<sbd::ShardStatus>& shard_status) {
  sbd::WebConfig web;
  if (!LoadWebConfigFlag(flags, &web)) return kExitConfig;
  const sigset_t signals = BlockReloadAndStopSignals();
  // Declared before everything that reads it: destroyed last.
  DetectorState state(config, shard_status);
  sbd::Exporter::Sources sources = ExporterSources(flags, state);
  const sbd::ExporterOptions exporter_options = ExporterOptionsFor(flags, web);
  sbd::Exporter exporter(std::move(sources), web, exporter_options);
  std::string error;
  if (!exporter.Bind(flags.listen_address, &error)) {
    spdlog::error("msg=\"cannot serve\" error=\"{}\"", error);
    return kExitUsage;
  }
  exporter.Start();
  state.external_url =
      DefaultExternalUrl(flags.listen_address, exporter.port(), !web.cert_file.empty());
  state.alert_path = MakeAlertPath(config.alerting(), state.external_url);
  state.Attach(*state.scheduler);
  state.scheduler->Start();
  sbd::ConfigFileWatcher watcher(state.store, config.watched_globs());
  // Declarations kept as Alertmanager silences (read once already, when the store was made)
  // are re-read on a thread of their own, stopped before the store goes.
  sbd::SilenceRefresher silence_refresher(state.store);
  spdlog::info("msg=\"started\" version={} listen_port={} tls={} shard={} clusters={}",
               sbd::GetBuildInfo().version, exporter.port(), web.cert_file.empty() ? "off" : "on",
               shard_status->shard().ToString(), config.clusters().size());

  ReloadUntilStopped(signals, flags, state, watcher, exporter);
  spdlog::info("msg=\"stopping\"");
  watcher.Stop();
  exporter.Stop();
  state.Current()->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  std::string error;
  if (!ParseFlags(argc, argv, &flags, &error)) {
    std::cerr << "splitbrain-detector: " << error << "\n\n" << kUsage;
    return kExitUsage;
  }
  if (flags.command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (flags.command == "version") {
    std::cout << sbd::VersionText();
    return 0;
  }
  // The check command's table is its output; verdict changes in the log would repeat it.
  if (flags.command == "check" && !flags.log_level_given) flags.log_level = "error";
  SetUpLogging(flags);
  auto config = Load(flags.config_file);
  if (!config) return kExitConfig;
  auto shard_status = std::make_shared<sbd::ShardStatus>(flags.shard);
  sbd::ValidatedConfig share = sbd::ShardShare(*config, flags.shard);
  shard_status->SetClusters(share.clusters().size(), config->clusters().size());
  if (flags.check_config) {
    std::cout << flags.config_file << ": ok, " << config->clusters().size() << " cluster(s)";
    if (flags.shard.total > 1) {
      std::cout << ", " << share.clusters().size() << " in shard " << flags.shard.ToString();
    }
    std::cout << "\n";
    return 0;
  }
  if (flags.command == "check") return RunCheck(share, *shard_status);
  return RunDetector(flags, std::move(share), shard_status);
}
