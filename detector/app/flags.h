// The command line of splitbrain-detector: its flags, the usage text (--help, and so the man
// page), and the exit codes the usage text promises.
#pragma once

#include <string>

#include "detector/output/shard.h"

namespace sbd {

/// Exit code of a command line that cannot be parsed (and of a listener that cannot bind).
constexpr int kExitUsage = 1;
/// Exit code of a config (or web config) file that does not validate.
constexpr int kExitConfig = 2;

/// The --help text, byte for byte what scripts/package/manpage turns into the man page.
extern const char* const kUsage;

/// What the command line asked for. Plain value type; not shared between threads.
struct Flags {
  /// "run" (the default), "check", "help" (--help, -h) or "version" (--version).
  std::string command = "run";
  std::string config_file = "splitbrain.yml";  ///< --config.file
  std::string listen_address = ":10259";       ///< --web.listen-address
  std::string web_config_file;                 ///< --web.config.file; empty: none
  std::string runbooks_dir;                    ///< --web.runbooks-dir; empty: the default
  std::string log_level = "info";              ///< --log.level, one spdlog accepts
  std::string log_format = "logfmt";           ///< --log.format: logfmt or json
  std::string shard_text = "0/1";              ///< --shard as given
  Shard shard;                                 ///< --shard parsed
  bool check_config = false;                   ///< --check-config
  bool allow_unauthenticated_changes = false;  ///< --web.allow-unauthenticated-changes
  bool log_level_given = false;                ///< --log.level was on the command line
};

/// Parses argv[1..argc) into `flags`: valued flags as `--name=value` or `--name value`, `check`
/// only as the first argument. False with `error` set (naming the flag) on an unknown flag, a
/// missing value, or an invalid --log.format, --log.level or --shard. Thread-safe.
bool ParseFlags(int argc, const char* const* argv, Flags* flags, std::string* error);

}  // namespace sbd
