#include "suppressors/declaration_store.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

namespace sbd {
namespace {

std::optional<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string RandomId() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "api-%012llx",
                static_cast<unsigned long long>(rng() & 0xffffffffffffULL));
  return buffer;
}

bool IsDropInName(const std::string& name) {
  auto ends = [&](const std::string& suffix) {
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return name.front() != '.' && (ends(".yml") || ends(".yaml"));
}

}  // namespace

DeclarationStore::DeclarationStore(const SuppressionsSpec& spec) : spec_(spec) {
  LoadState();
  Refresh();
}

void DeclarationStore::LoadState() {
  if (spec_.state_file.empty()) return;
  const auto text = ReadWhole(spec_.state_file);
  if (!text) {
    if (access(spec_.state_file.c_str(), F_OK) == 0) {
      state_errors_.push_back({spec_.state_file, 0, 0, "", "cannot read the state file"});
    }
    return;
  }
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    state_errors_.push_back({spec_.state_file, e.mark.line + 1, e.mark.column + 1, "", e.msg});
    return;
  }
  if (root.IsNull()) return;
  if (!root.IsSequence()) {
    state_errors_.push_back({spec_.state_file, 1, 1, "", "expected a list of declarations"});
    return;
  }
  DeclarationRules rules;
  rules.max_duration = spec_.max_duration;
  rules.now = std::chrono::system_clock::now();
  rules.allow_identity = true;
  rules.allow_expired = true;
  for (size_t i = 0; i < root.size(); ++i) {
    auto parsed = ParseDeclaration(root[i], spec_.state_file, "[" + std::to_string(i) + "]", rules);
    if (auto* errors = std::get_if<std::vector<ConfigError>>(&parsed)) {
      for (auto& e : *errors) state_errors_.push_back(std::move(e));
      continue;
    }
    Declaration d = std::get<Declaration>(std::move(parsed));
    // Expired ones are dropped at the next write; until then they are shown as expired.
    api_.push_back(std::move(d));
  }
  for (const auto& e : state_errors_) {
    spdlog::error("msg=\"declaration state file rejected\" error=\"{}\"", e.ToString());
  }
}

void DeclarationStore::Refresh() {
  if (spec_.dropin_dir.empty()) return;
  struct Seen {
    std::string fingerprint;  // mtime and size
    time_t written;           // mtime, seconds
  };
  std::map<std::string, Seen> seen;  // by path
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(spec_.dropin_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!IsDropInName(name)) continue;
    struct stat st {};
    if (stat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    seen[entry.path().string()] = {std::to_string(st.st_mtim.tv_sec) + "." +
                                       std::to_string(st.st_mtim.tv_nsec) + "/" +
                                       std::to_string(st.st_size),
                                   st.st_mtim.tv_sec};
  }
  std::map<std::string, DropIn> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [path, file] : seen) {
      auto it = dropins_.find(path);
      if (it != dropins_.end() && it->second.fingerprint == file.fingerprint) {
        next[path] = it->second;
      }
    }
  }
  for (const auto& [path, file] : seen) {
    if (next.count(path)) continue;
    DropIn parsed;
    parsed.fingerprint = file.fingerprint;
    const auto text = ReadWhole(path);
    if (!text) {
      parsed.errors.push_back({path, 0, 0, "", "cannot read file"});
    } else {
      DeclarationRules rules;
      rules.max_duration = spec_.max_duration;
      // Measured from when the file was written, so that touching it cannot extend it.
      rules.now = std::chrono::system_clock::from_time_t(file.written);
      rules.allow_expired = true;
      auto result = ParseDeclarationText(*text, path, rules);
      if (auto* errors = std::get_if<std::vector<ConfigError>>(&result)) {
        parsed.errors = std::move(*errors);
      } else {
        Declaration d = std::get<Declaration>(std::move(result));
        d.id = std::filesystem::path(path).filename().string();
        d.source = "file";
        d.origin = path;
        if (d.author.empty()) d.author = "file " + d.id;
        parsed.declaration = std::move(d);
      }
    }
    for (const auto& e : parsed.errors) {
      spdlog::error("msg=\"declaration file rejected; the others keep working\" error=\"{}\"",
                    e.ToString());
    }
    if (parsed.declaration) {
      spdlog::info("msg=\"declaration loaded\" declaration=\"{}\"", parsed.declaration->Describe());
    }
    next[path] = std::move(parsed);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [path, old] : dropins_) {
    if (!next.count(path) && old.declaration) {
      spdlog::info("msg=\"declaration file removed\" file={}", path);
    }
  }
  dropins_ = std::move(next);
}

std::vector<Declaration> DeclarationStore::All() const {
  std::vector<Declaration> out = spec_.declarations;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [path, dropin] : dropins_) {
    if (dropin.declaration) out.push_back(*dropin.declaration);
  }
  out.insert(out.end(), api_.begin(), api_.end());
  return out;
}

std::vector<Declaration> DeclarationStore::Active(WallTime now) const {
  std::vector<Declaration> out;
  for (auto& d : All()) {
    if (d.ActiveAt(now)) out.push_back(std::move(d));
  }
  return out;
}

std::vector<ConfigError> DeclarationStore::FileErrors() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ConfigError> out = state_errors_;
  for (const auto& [path, dropin] : dropins_) {
    out.insert(out.end(), dropin.errors.begin(), dropin.errors.end());
  }
  return out;
}

bool DeclarationStore::Persist(const std::vector<Declaration>& api, std::string* error) const {
  if (spec_.state_file.empty()) {
    *error =
        "no suppressions.state_file is configured: API declarations would not survive a "
        "restart";
    return false;
  }
  nlohmann::json list = nlohmann::json::array();
  for (const auto& d : api) {
    nlohmann::json item = {{"id", d.id},
                           {"kind", DeclarationKindName(d.kind)},
                           {"cluster", d.cluster},
                           {"reason", d.reason},
                           {"author", d.author},
                           {"created", FormatRfc3339(d.created)},
                           {"expires", FormatRfc3339(d.expires)}};
    if (!d.scope.empty()) item["scope"] = d.scope;
    if (!d.member.empty()) item["member"] = d.member;
    list.push_back(std::move(item));
  }
  // Write, flush, rename: a crash leaves the old file or the new one, never half of one.
  const std::string tmp = spec_.state_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << list.dump(2) << "\n";
    out.flush();
    if (!out) {
      *error = "cannot write " + tmp;
      return false;
    }
  }
  if (std::rename(tmp.c_str(), spec_.state_file.c_str()) != 0) {
    *error = "cannot replace " + spec_.state_file + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

std::variant<Declaration, std::vector<ConfigError>> DeclarationStore::Add(const std::string& body,
                                                                          WallTime now) {
  DeclarationRules rules;
  rules.max_duration = spec_.max_duration;
  rules.now = now;
  rules.allow_duration = true;
  auto parsed = ParseDeclarationText(body, "request body", rules);
  if (std::holds_alternative<std::vector<ConfigError>>(parsed)) return parsed;
  Declaration d = std::get<Declaration>(std::move(parsed));
  d.id = RandomId();
  d.source = "api";
  d.origin = "api";
  std::lock_guard<std::mutex> lock(mu_);
  if (!state_errors_.empty()) {
    return std::vector<ConfigError>{
        {spec_.state_file, 0, 0, "", "the state file was rejected at start; fix it first"}};
  }
  std::vector<Declaration> next;
  for (const auto& old : api_) {
    if (old.ActiveAt(now)) next.push_back(old);
  }
  next.push_back(d);
  std::string error;
  if (!Persist(next, &error)) return std::vector<ConfigError>{{"", 0, 0, "", error}};
  api_ = std::move(next);
  spdlog::info("msg=\"declaration added\" declaration=\"{}\"", d.Describe());
  return d;
}

std::string DeclarationStore::Remove(const std::string& id, bool* not_found) {
  *not_found = false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(api_.begin(), api_.end(), [&](const auto& d) { return d.id == id; });
  if (it == api_.end()) {
    for (const auto& d : spec_.declarations) {
      if (d.id == id) return "declared in the config file " + d.origin + "; remove it there";
    }
    for (const auto& [path, dropin] : dropins_) {
      if (dropin.declaration && dropin.declaration->id == id) {
        return "declared in the drop-in file " + path + "; delete that file";
      }
    }
    *not_found = true;
    return "no declaration " + id;
  }
  std::vector<Declaration> next;
  const auto now = std::chrono::system_clock::now();
  for (const auto& d : api_) {
    if (d.id != id && d.ActiveAt(now)) next.push_back(d);
  }
  std::string error;
  if (!Persist(next, &error)) return error;
  spdlog::info("msg=\"declaration removed\" declaration=\"{}\"", it->Describe());
  api_ = std::move(next);
  return "";
}

}  // namespace sbd
