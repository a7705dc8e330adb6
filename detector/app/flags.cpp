#include "detector/app/flags.h"

#include <spdlog/spdlog.h>

#include <map>
#include <variant>

namespace sbd {

const char* const kUsage = R"(usage:
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

bool ParseFlags(int argc, const char* const* argv, Flags* flags, std::string* error) {
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
  auto shard = ParseShard(flags->shard_text);
  if (auto* why = std::get_if<std::string>(&shard)) {
    *error = *why;
    return false;
  }
  flags->shard = std::get<Shard>(shard);
  return true;
}

}  // namespace sbd
