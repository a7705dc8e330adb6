// The `remediation:` blocks: a cluster's mode and fencing role, and the fleet-wide cap.
#include "detector/config/remediation.h"

#include "detector/config/config_reader.h"
#include "detector/config/kinds/kinds.h"

namespace sbd {

using namespace cfg;

namespace {

constexpr std::chrono::milliseconds kMinRemediationTimeout{100};
constexpr std::chrono::milliseconds kMaxRemediationTimeout{30000};
constexpr std::chrono::milliseconds kMinCapWindow{60000};
constexpr int kMaxFencesCap = 100;

// fence needs a kind that can act; dry_run a kind whose lock store names the holder. False,
// reported, when the kind cannot have the mode.
bool CheckKind(ConfigReader& r, const ConfigReader::Entry& mode, const std::string& path,
               const KindConfig* kind, RemediationMode wanted) {
  if (kind == nullptr) return true;  // an invalid kind: already reported
  if (kind->remediation == RemediationSupport::kNone) {
    r.AddError(mode.Mark(), path,
               std::string("kind: ") + kind->name +
                   " has no lock store to name the holder, so no member can be told to be the "
                   "zombie; remediation needs one");
  } else if (wanted == RemediationMode::kFence &&
             kind->remediation == RemediationSupport::kDryRunOnly) {
    r.AddError(mode.Mark(), path,
               std::string("mode: fence is not available for kind: ") + kind->name +
                   " yet (only for PostgreSQL kinds and Redis under Sentinel); mode: dry_run is");
  } else {
    return true;
  }
  return false;
}

}  // namespace

const char* RemediationModeName(RemediationMode mode) {
  switch (mode) {
    case RemediationMode::kOff:
      return "off";
    case RemediationMode::kDryRun:
      return "dry_run";
    case RemediationMode::kFence:
      return "fence";
  }
  return "off";
}

void ParseClusterRemediation(ConfigReader& r, const ConfigReader::Entry& entry,
                             const std::string& path, const KindConfig* kind,
                             ClusterSpec& cluster) {
  RemediationSpec& spec = cluster.remediation;
  const std::optional<ConfigReader::Fields> fields =
      r.ReadMapping(entry, path, {"mode", "user", "password_file", "password_env", "timeout"});
  if (!fields) return;
  const ConfigReader::Entry* mode = r.Required(*fields, entry.value, path, "mode");
  if (!mode) return;
  const std::string mode_path = Join(path, "mode");
  const std::string text = mode->value.IsScalar() ? mode->value.Scalar() : "";
  if (text == "dry_run") {
    spec.mode = RemediationMode::kDryRun;
  } else if (text == "fence") {
    spec.mode = RemediationMode::kFence;
  } else {
    r.AddError(mode->Mark(), mode_path, "expected dry_run or fence");
    return;
  }
  if (!CheckKind(r, *mode, mode_path, kind, spec.mode)) return;
  r.PasswordSources(*fields, path, spec.password_file, spec.password_env);
  if (const ConfigReader::Entry* user = ConfigReader::Optional(*fields, "user")) {
    const std::optional<std::string> value = r.String(*user, Join(path, "user"));
    if (value && !IsName(*value)) {
      r.AddError(user->Mark(), Join(path, "user"), "expected a role name (letters, digits, _ . -)");
    } else if (value) {
      spec.user = *value;
    }
  } else if (spec.mode == RemediationMode::kFence && kind != nullptr &&
             kind->remediation == RemediationSupport::kPostgresFence) {
    r.AddError(entry.Mark(), Join(path, "user"),
               "required for mode: fence (a role of its own; the probe's stays read-only)");
  }
  const ConfigReader::Timing timeout = r.Duration(*fields, path, "timeout", kMinRemediationTimeout);
  if (timeout.ok && timeout.given && *timeout.given > kMaxRemediationTimeout) {
    r.AddError(timeout.mark, Join(path, "timeout"),
               "timeout " + FormatDuration(*timeout.given) + " is above the maximum " +
                   FormatDuration(kMaxRemediationTimeout));
  } else if (timeout.ok && timeout.given) {
    spec.timeout = *timeout.given;
  }
}

void ParseRemediationLimits(ConfigReader& r, const ConfigReader::Entry& entry,
                            const std::string& path, RemediationLimits& limits) {
  const std::optional<ConfigReader::Fields> fields =
      r.ReadMapping(entry, path, {"max_fences", "window"});
  if (!fields) return;
  if (const ConfigReader::Entry* max = ConfigReader::Optional(*fields, "max_fences")) {
    limits.max_fences =
        r.Count(*max, Join(path, "max_fences"), 0, kMaxFencesCap).value_or(limits.max_fences);
  }
  const ConfigReader::Timing window = r.Duration(*fields, path, "window", kMinCapWindow);
  if (window.ok && window.given) limits.window = *window.given;
}

}  // namespace sbd
