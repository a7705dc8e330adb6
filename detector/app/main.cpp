// splitbrain-detector: tells on-call, within one lease TTL, that two members of a cluster
// are writable at once. See README.md.

#include <signal.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "detector/alerting/alert_pusher.h"
#include "detector/common/build_info.h"
#include "detector/common/internal_errors.h"
#include "detector/config/config.h"
#include "detector/config/file_sd.h"
#include "detector/engine/scheduler.h"
#include "detector/output/alerts.h"
#include "detector/output/exporter.h"
#include "detector/output/incident_log.h"
#include "detector/output/metrics.h"
#include "detector/output/shard.h"
#include "detector/output/status.h"
#include "suppressors/declaration_store.h"

namespace {

constexpr const char* kDefaultListenAddress = ":10259";
constexpr int kExitUsage = 1;
constexpr int kExitConfig = 2;

const char* kUsage = R"(usage:
  splitbrain-detector [flags]                    run the detector and serve /metrics
  splitbrain-detector check [flags]              probe every cluster once and print a table
  splitbrain-detector --check-config [flags]     validate the config file and exit

flags:
  --config.file=PATH          YAML config (default splitbrain.yml)
  --web.listen-address=ADDR   where to serve /metrics, /status, /-/healthy, /-/ready
                              (default :10259; port 0 picks a free one)
  --web.config.file=PATH      TLS and basic auth, in the Prometheus exporter-toolkit format;
                              re-read on SIGHUP. Without basic_auth_users the declarations
                              API refuses POST and DELETE (403)
  --web.allow-unauthenticated-changes
                              let anyone who reaches the port add and remove declarations
                              without basic auth (a trusted network only; authors are then
                              recorded as "unauthenticated:<author>")
  --web.runbooks-dir=DIR      runbooks served under /runbooks/ (default: the installed ones)
  --log.level=LEVEL           debug|info|warn|error (default info)
  --log.format=FORMAT         logfmt|json (default logfmt)
  --shard=INDEX/TOTAL         hold only the clusters whose hashmod of the name (MD5, as
                              Prometheus' relabel action) modulo TOTAL is INDEX; run TOTAL
                              detectors with the same config, 0/TOTAL to TOTAL-1/TOTAL
                              (default 0/1: every cluster)
  --version                   print the version and exit

check exit codes: 0 every cluster healthy, 1 usage error, 2 config error, 8 suppressed,
  3 unknown, 4 no_primary, 5 drift, 6 suspected, 7 split_brain (the worst cluster decides,
  in that order)
)";

struct Flags {
  std::string command = "run";
  std::string config_file = "splitbrain.yml";
  std::string listen_address = kDefaultListenAddress;
  std::string web_config_file;
  std::string runbooks_dir;
  std::string log_level = "info";
  std::string log_format = "logfmt";
  std::string shard_text = "0/1";
  sbd::Shard shard;
  bool check_config = false;
  bool allow_unauthenticated_changes = false;
  bool log_level_given = false;
};

// Escapes the message for the JSON log format; spdlog leaves %v raw.
class JsonEscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string escaped =
        nlohmann::json(std::string(msg.payload.data(), msg.payload.size())).dump();
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

bool ParseFlags(int argc, char** argv, Flags* flags, std::string* error) {
  std::map<std::string, std::string*> values = {
      {"--config.file", &flags->config_file},
      {"--web.listen-address", &flags->listen_address},
      {"--web.config.file", &flags->web_config_file},
      {"--web.runbooks-dir", &flags->runbooks_dir},
      {"--log.level", &flags->log_level},
      {"--log.format", &flags->log_format},
      {"--shard", &flags->shard_text},
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i == 1 && arg == "check") {
      flags->command = "check";
      continue;
    }
    if (arg == "--check-config") {
      flags->check_config = true;
      continue;
    }
    if (arg == "--web.allow-unauthenticated-changes") {
      flags->allow_unauthenticated_changes = true;
      continue;
    }
    if (arg == "--help" || arg == "-h" || arg == "--version") {
      flags->command = arg == "--version" ? "version" : "help";
      continue;
    }
    const auto eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    auto it = values.find(name);
    if (it == values.end()) {
      *error = "unknown flag " + name;
      return false;
    }
    if (name == "--log.level") flags->log_level_given = true;
    if (eq != std::string::npos) {
      *it->second = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      *it->second = argv[++i];
    } else {
      *error = "flag " + name + " needs a value";
      return false;
    }
  }
  if (flags->log_format != "logfmt" && flags->log_format != "json") {
    *error = "--log.format must be logfmt or json";
    return false;
  }
  if (spdlog::level::from_str(flags->log_level) == spdlog::level::off &&
      flags->log_level != "off") {
    *error = "--log.level must be debug, info, warn or error";
    return false;
  }
  auto shard = sbd::ParseShard(flags->shard_text);
  if (auto* why = std::get_if<std::string>(&shard)) {
    *error = *why;
    return false;
  }
  flags->shard = std::get<sbd::Shard>(shard);
  return true;
}

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

double Now() {
  return std::chrono::duration<double>(sbd::WallClock::now().time_since_epoch()).count();
}

int RunCheck(const sbd::ValidatedConfig& config, const sbd::ShardStatus& shard) {
  sbd::DeclarationStore store(config.suppressions());
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

// The declarations HTTP API over a store: JSON in, JSON out.
sbd::Exporter::Sources::Answer ErrorAnswer(int status,
                                           const std::vector<sbd::ConfigError>& errors) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : errors) list.push_back(e.file.empty() ? e.message : e.ToString());
  // Errors may quote the request: never let invalid UTF-8 make the answer throw.
  return {status, nlohmann::json{{"errors", list}}.dump(2, ' ', false,
                                                        nlohmann::json::error_handler_t::replace) +
                      "\n"};
}

// The HTTP status of a refused declaration change: the caller's fault, a conflict with what
// the store holds, or the detector's fault (it could not keep it).
int RefusalStatus(sbd::StoreRefusal refusal) {
  switch (refusal) {
    case sbd::StoreRefusal::kInvalid:
      return 400;
    case sbd::StoreRefusal::kNotFound:
      return 404;
    case sbd::StoreRefusal::kNotPersisted:
      return 500;
    default:
      return 409;
  }
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

int RunDetector(const Flags& flags, sbd::ValidatedConfig config,
                const std::shared_ptr<sbd::ShardStatus>& shard_status) {
  sbd::WebConfig web;
  if (!flags.web_config_file.empty()) {
    auto loaded = sbd::LoadWebConfig(flags.web_config_file);
    if (auto* errors = std::get_if<std::vector<std::string>>(&loaded)) {
      for (const auto& e : *errors) spdlog::error("msg=\"invalid web config\" error=\"{}\"", e);
      return kExitConfig;
    }
    web = std::get<sbd::WebConfig>(loaded);
  }

  // Signals are taken synchronously by this thread; every thread started later inherits
  // the mask.
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGHUP, SIGINT, SIGTERM}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Declared before everything that reads it: destroyed last.
  std::unique_ptr<AlertPath> alert_path;
  std::mutex alert_mu;
  sbd::ConfigReloadStatus reload_status;
  reload_status.last_success_timestamp = Now();
  reload_status.last_attempt_timestamp = Now();
  std::mutex scheduler_mu;
  auto scheduler = std::make_shared<sbd::Scheduler>(config);
  // One declaration store for the life of the process, reloaded in place (never swapped).
  const auto store = std::make_shared<sbd::DeclarationStore>(config.suppressions());
  auto current = [&] {
    std::lock_guard<std::mutex> lock(scheduler_mu);
    return scheduler;
  };
  auto declarations = [&](sbd::WallClock::time_point t) { return store->Active(t); };

  sbd::Exporter::Sources sources;
  sources.metrics = std::make_shared<sbd::DetectorCollector>(
      [&] { return current()->Snapshot(); }, &reload_status,
      [&] {
        std::lock_guard<std::mutex> lock(alert_mu);
        return alert_path && alert_path->pusher ? alert_path->pusher->Stats()
                                                : std::vector<sbd::AlertmanagerStats>{};
      },
      [&] { return store->View(); });
  sources.metrics = sbd::WithShardMetrics(sources.metrics, shard_status);
  // The incident log keeps the spec it starts with (a reload does not move its file).
  const auto incidents = std::make_shared<sbd::IncidentLog>(config.incident_log());
  incidents->SetClusters(config.clusters());
  sources.metrics = sbd::WithIncidentLogMetrics(sources.metrics, incidents);
  sources.list_incidents = [incidents](const std::multimap<std::string, std::string>& query) {
    const auto [status, json] = incidents->HttpGet(query);
    return sbd::Exporter::Sources::Answer{status, json};
  };
  sources.status = [&](bool as_text) {
    const auto snapshot = current()->Snapshot();
    const sbd::DeclarationsView view = store->View();
    if (as_text) return shard_status->Text() + sbd::StatusText(snapshot, &view);
    nlohmann::json status = sbd::StatusJson(snapshot, &view);
    status["shard"] = shard_status->Json();
    return status.dump(2) + "\n";
  };
  sources.list_declarations = [&]() -> sbd::Exporter::Sources::Answer {
    nlohmann::json list = nlohmann::json::array();
    const auto now = sbd::WallClock::now();
    for (const auto& d : store->All()) list.push_back(sbd::DeclarationJson(d, now));
    return {200, nlohmann::json{{"declarations", list}}.dump(2) + "\n"};
  };
  sources.add_declaration = [&](const std::string& body) -> sbd::Exporter::Sources::Answer {
    sbd::StoreRefusal refusal = sbd::StoreRefusal::kNone;
    auto added = store->Add(body, sbd::WallClock::now(), std::nullopt, &refusal);
    if (auto* errors = std::get_if<std::vector<sbd::ConfigError>>(&added)) {
      return ErrorAnswer(RefusalStatus(refusal), *errors);
    }
    return {201,
            sbd::DeclarationJson(std::get<sbd::Declaration>(added), sbd::WallClock::now()).dump(2) +
                "\n"};
  };
  sources.remove_declaration = [&](const std::string& id) -> sbd::Exporter::Sources::Answer {
    bool not_found = false;
    sbd::StoreRefusal refusal = sbd::StoreRefusal::kNone;
    const std::string why = store->Remove(id, &not_found, &refusal);
    if (why.empty()) return {200, nlohmann::json{{"removed", id}}.dump() + "\n"};
    return ErrorAnswer(RefusalStatus(refusal), {{"", 0, 0, "", why}});
  };
  sources.ready = [&] { return current()->AllClustersHaveRun(); };
  sources.runbooks_dir = flags.runbooks_dir.empty() ? DefaultRunbooksDir() : flags.runbooks_dir;
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
  sbd::Exporter exporter(std::move(sources), web, exporter_options);
  std::string error;
  if (!exporter.Bind(flags.listen_address, &error)) {
    spdlog::error("msg=\"cannot serve\" error=\"{}\"", error);
    return kExitUsage;
  }
  exporter.Start();
  const std::string external_url =
      DefaultExternalUrl(flags.listen_address, exporter.port(), !web.cert_file.empty());
  alert_path = MakeAlertPath(config.alerting(), external_url);
  // A confirmed split brain is handed to the pusher in the round that confirms it.
  auto push = [&](const sbd::ClusterSnapshot& cluster) {
    incidents->ObserveRound(cluster);
    std::lock_guard<std::mutex> lock(alert_mu);
    if (!alert_path->pusher) return;
    alert_path->pusher->Update(cluster.spec.name,
                               sbd::AlertsFor(cluster, alert_path->spec, alert_path->links));
  };
  scheduler->SetRoundListener(push);
  scheduler->SetDeclarationSource(declarations);
  scheduler->Start();

  // Drop-in declarations are re-read every second; a change to a file_sd target file
  // reloads the config as SIGHUP does.
  std::mutex watch_mu;
  std::condition_variable watch_cv;
  bool watch_stop = false;
  std::vector<std::string> watched = config.watched_globs();
  std::thread watcher([&] {
    std::string fingerprint = sbd::FileSdFingerprint(watched);
    std::unique_lock<std::mutex> lock(watch_mu);
    while (!watch_cv.wait_for(lock, std::chrono::seconds(1), [&] { return watch_stop; })) {
      const std::vector<std::string> globs = watched;
      lock.unlock();
      sbd::Guarded("file watcher", [&] {
        store->Refresh();
        const std::string now = sbd::FileSdFingerprint(globs);
        if (now != fingerprint) {
          fingerprint = now;
          spdlog::info("msg=\"file_sd targets changed; reloading\"");
          kill(getpid(), SIGHUP);
        }
      });
      lock.lock();
    }
  });
  // Declarations kept as Alertmanager silences (read once already, when the store was made)
  // are re-read on a thread of their own, stopped before the store goes.
  sbd::SilenceRefresher silence_refresher(store);
  spdlog::info("msg=\"started\" version={} listen_port={} tls={} shard={} clusters={}",
               sbd::GetBuildInfo().version, exporter.port(), web.cert_file.empty() ? "off" : "on",
               shard_status->shard().ToString(), config.clusters().size());

  for (;;) {
    int signal = 0;
    sigwait(&signals, &signal);
    if (signal != SIGHUP) break;
    if (!flags.web_config_file.empty()) exporter.ReloadWebConfig(flags.web_config_file);
    reload_status.last_attempt_timestamp = Now();
    auto loaded = Load(flags.config_file);
    if (!loaded) {
      reload_status.last_successful = false;
      spdlog::error("msg=\"reload failed; keeping the last good config\" file={}",
                    flags.config_file);
      continue;
    }
    // From here on the config is this shard's share: clusters of other shards are not run,
    // and those that left the share resolve their alerts.
    const sbd::ValidatedConfig share = sbd::ShardShare(*loaded, shard_status->shard());
    auto next = std::make_shared<sbd::Scheduler>(share);
    {
      std::lock_guard<std::mutex> lock(watch_mu);
      watched = share.watched_globs();
    }
    auto previous = current();
    previous->Stop();
    const auto old_snapshot = previous->Snapshot();
    next->Inherit(old_snapshot);
    {
      std::lock_guard<std::mutex> lock(alert_mu);
      // Clusters that left the config resolve their alerts; a changed alerting section
      // starts a new pusher (its alerts are re-sent at once).
      for (const auto& old : old_snapshot) {
        bool kept = false;
        for (const auto& c : share.clusters()) kept = kept || c.name == old.spec.name;
        if (!kept && alert_path->pusher) alert_path->pusher->Update(old.spec.name, {});
      }
      const auto& was = alert_path->spec;
      const auto& now = share.alerting();
      if (was.alertmanager_urls != now.alertmanager_urls || was.timeout != now.timeout ||
          was.resend_interval != now.resend_interval) {
        alert_path = MakeAlertPath(now, external_url);
      } else {
        alert_path = MakeAlertPath(now, external_url, std::move(alert_path->pusher));
      }
    }
    incidents->SetClusters(share.clusters());
    next->SetRoundListener(push);
    next->SetDeclarationSource(declarations);
    {
      std::lock_guard<std::mutex> lock(scheduler_mu);
      scheduler = next;
      // Reloaded in place, with the scheduler's swap: a DELETE or POST answered during the
      // reload is never undone by a store built from the files before it.
      store->Reload(share.suppressions());
    }
    next->Start();
    shard_status->SetClusters(share.clusters().size(), loaded->clusters().size());
    reload_status.last_successful = true;
    reload_status.last_success_timestamp = Now();
    spdlog::info("msg=\"config reloaded\" clusters={} configured_clusters={}",
                 share.clusters().size(), loaded->clusters().size());
  }
  spdlog::info("msg=\"stopping\"");
  {
    std::lock_guard<std::mutex> lock(watch_mu);
    watch_stop = true;
  }
  watch_cv.notify_all();
  watcher.join();
  exporter.Stop();
  current()->Stop();
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
