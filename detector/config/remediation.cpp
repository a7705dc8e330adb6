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
  } else {
    return true;
  }
  return false;
}

// A hook's URL may not carry credentials: they would show wherever the URL does.
bool HasUserInfo(const std::string& url) {
  const size_t start = url.find("://") + 3;
  const size_t end = url.find_first_of("/?#", start);
  return url.substr(start, end == std::string::npos ? std::string::npos : end - start).find('@') !=
         std::string::npos;
}

// The `hook:` block: the operator's endpoint that stops a zombie process.
std::optional<RemediationHookSpec> ParseHook(ConfigReader& r, const ConfigReader::Entry& entry,
                                             const std::string& path) {
  const std::optional<ConfigReader::Fields> fields =
      r.ReadMapping(entry, path, {"url", "token_file", "token_env", "ca_file"});
  if (!fields) return std::nullopt;
  RemediationHookSpec hook;
  bool ok = true;
  if (const ConfigReader::Entry* url = r.Required(*fields, entry.value, path, "url")) {
    const std::optional<std::string> value = r.HttpUrl(*url, Join(path, "url"), false);
    if (value && HasUserInfo(*value)) {
      r.AddError(url->Mark(), Join(path, "url"),
                 "the URL may not carry credentials (user:password@): use token_file or "
                 "token_env");
      ok = false;
    } else if (value) {
      hook.url = *value;
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  for (const char* key : {"token_file", "ca_file"}) {
    const ConfigReader::Entry* file = ConfigReader::Optional(*fields, key);
    if (!file) continue;
    const std::optional<std::string> value = r.String(*file, Join(path, key));
    if (value && value->empty()) {
      r.AddError(file->Mark(), Join(path, key), "expected a file path");
      ok = false;
    } else if (value && std::string(key) == "token_file") {
      hook.token_file = *value;
    } else if (value) {
      hook.ca_file = *value;
    } else {
      ok = false;
    }
  }
  if (const ConfigReader::Entry* env = ConfigReader::Optional(*fields, "token_env")) {
    const std::optional<std::string> value = r.String(*env, Join(path, "token_env"));
    if (value && !IsEnvName(*value)) {
      r.AddError(env->Mark(), Join(path, "token_env"), "expected an environment variable name");
      ok = false;
    } else if (value && hook.token_file) {
      r.AddError(env->Mark(), Join(path, "token_env"),
                 "only one of token_file and token_env may be set");
      ok = false;
    } else if (value) {
      hook.token_env = *value;
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return hook;
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
  const std::optional<ConfigReader::Fields> fields = r.ReadMapping(
      entry, path, {"mode", "user", "password_file", "password_env", "timeout", "hook"});
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
  const bool by_hook = kind != nullptr && kind->remediation == RemediationSupport::kHook;
  if (const ConfigReader::Entry* hook = ConfigReader::Optional(*fields, "hook")) {
    if (!by_hook) {
      r.AddError(hook->Mark(), Join(path, "hook"),
                 std::string("kind: ") + (kind != nullptr ? kind->name : "?") +
                     " is fenced by the detector itself; a hook is for the lease and election "
                     "kinds, whose members are processes");
    } else {
      spec.hook = ParseHook(r, *hook, Join(path, "hook"));
    }
  } else if (by_hook && spec.mode == RemediationMode::kFence) {
    r.AddError(entry.Mark(), Join(path, "hook"),
               std::string("required for mode: fence on kind: ") + kind->name +
                   " (a process cannot be fenced from outside: the hook is asked to stop it)");
  }
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
