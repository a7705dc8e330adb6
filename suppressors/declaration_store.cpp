#include "suppressors/declaration_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "detector/common/internal_errors.h"
#include "detector/common/json_text.h"
#include "detector/common/logfmt.h"

namespace sbd {
namespace {

// A declaration is a few hundred bytes; the state file holds at most kMaxApiDeclarations.
constexpr off_t kMaxDropInBytes = 64 * 1024;
constexpr off_t kMaxStateFileBytes = 16 * 1024 * 1024;
constexpr size_t kMaxApiDeclarations = 1000;

std::optional<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
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

// The file name is the declaration's id: in URLs, logs and JSON, so plain characters only.
bool IsPlainFileName(const std::string& name) {
  return name.size() <= 200 && std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
         });
}

WallTime ToWallTime(const struct timespec& t) {
  return std::chrono::system_clock::from_time_t(t.tv_sec) +
         std::chrono::duration_cast<WallTime::duration>(std::chrono::nanoseconds(t.tv_nsec));
}

}  // namespace

bool WriteFileAtomically(const std::string& path, const std::string& text, std::string* error) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir =
      target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
  std::string name = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot create a temporary file beside " + path + ": " + std::strerror(errno);
    return false;
  }
  auto fail = [&](const std::string& what, bool close_fd) {
    const int saved = errno;
    if (close_fd) close(fd);
    unlink(name.c_str());
    *error = what + " " + name + ": " + std::strerror(saved);
    return false;
  };
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot write", true);
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("cannot sync", true);
  if (close(fd) != 0) return fail("cannot close", false);
  if (std::rename(name.c_str(), path.c_str()) != 0) return fail("cannot rename", false);
  // The new content is in place and is what memory will hold: a failed directory sync only
  // weakens durability, so it is logged rather than reported as a failed write.
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || fsync(dir_fd) != 0) {
    spdlog::warn("msg=\"cannot sync the state file's directory\" dir=\"{}\" error=\"{}\"",
                 LogfmtEscape(dir.string()), std::strerror(errno));
  }
  if (dir_fd >= 0) close(dir_fd);
  return true;
}

DeclarationStore::DeclarationStore(const SuppressionsSpec& spec, StateFileWriter writer)
    : writer_(writer ? std::move(writer) : StateFileWriter(WriteFileAtomically)), spec_(spec) {
  StateFile state = LoadState(spec_);
  api_ = std::move(state.declarations);
  state_errors_ = std::move(state.errors);
  Refresh();
  RefreshSilences();
}

void DeclarationStore::RefreshSilences() {
  std::lock_guard<std::mutex> reading(silence_mu_);
  AlertmanagerSilencesSpec spec;
  Millis max_duration;
  {
    std::lock_guard<std::mutex> lock(mu_);
    spec = spec_.alertmanager_silences;
    max_duration = spec_.max_duration;
  }
  SilenceDeclarations next;
  if (spec.enabled) {
    next = silence_reader_.Read(spec, max_duration, std::chrono::system_clock::now());
  } else {
    silence_reader_ = AlertmanagerSilenceReader();
  }
  std::lock_guard<std::mutex> lock(mu_);
  silences_ = std::move(next);
}

std::optional<Millis> DeclarationStore::SilenceRefreshInterval() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!spec_.alertmanager_silences.enabled) return std::nullopt;
  return spec_.alertmanager_silences.refresh_interval;
}

void DeclarationStore::Reload(const SuppressionsSpec& spec) {
  std::lock_guard<std::mutex> refreshing(refresh_mu_);
  {
    // Under write_mu_ throughout: a write sees the old spec and state or the new ones. The
    // state file is read before mu_ is taken.
    std::lock_guard<std::mutex> writing(write_mu_);
    std::string old_file;
    bool reread = false;
    size_t api_in_memory = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old_file = spec_.state_file;
      reread = spec.state_file != old_file || !state_errors_.empty();
      api_in_memory = api_.size();
    }
    std::optional<StateFile> state;
    if (reread) state = LoadState(spec);
    if (state && api_in_memory > 0 && spec.state_file != old_file) {
      spdlog::warn(
          "msg=\"state file changed; the API declarations now come from the new one\" "
          "old=\"{}\" new=\"{}\" dropped={} loaded={}",
          LogfmtEscape(old_file), LogfmtEscape(spec.state_file), api_in_memory,
          state->declarations.size());
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (state) {
      api_ = std::move(state->declarations);
      state_errors_ = std::move(state->errors);
    }
    spec_ = spec;
  }
  RefreshLocked(true);
}

DeclarationStore::StateFile DeclarationStore::LoadState(const SuppressionsSpec& spec) {
  StateFile state;
  if (spec.state_file.empty()) return state;
  auto reject = [&](int line, int column, const std::string& message) {
    state.errors.push_back({spec.state_file, line, column, "", message});
  };
  struct stat st {};
  if (stat(spec.state_file.c_str(), &st) != 0) {
    if (errno != ENOENT) reject(0, 0, std::string("cannot stat: ") + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    reject(0, 0, "not a regular file");
  } else if (st.st_size > kMaxStateFileBytes) {
    reject(0, 0, "larger than " + std::to_string(kMaxStateFileBytes) + " bytes");
  } else if (const auto text = ReadWhole(spec.state_file); !text) {
    reject(0, 0, "cannot read the state file");
  } else {
    YAML::Node root;
    try {
      root = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
      reject(std::max(e.mark.line, 0) + 1, std::max(e.mark.column, 0) + 1, e.msg);
    }
    if (state.errors.empty() && !root.IsNull() && !root.IsSequence()) {
      reject(1, 1, "expected a list of declarations");
    } else if (state.errors.empty() && root.IsSequence()) {
      DeclarationRules rules;
      rules.max_duration = spec.max_duration;
      rules.now = std::chrono::system_clock::now();
      rules.allow_identity = true;
      rules.allow_expired = true;
      for (size_t i = 0; i < root.size(); ++i) {
        auto parsed =
            ParseDeclaration(root[i], spec.state_file, "[" + std::to_string(i) + "]", rules);
        if (auto* errors = std::get_if<std::vector<ConfigError>>(&parsed)) {
          for (auto& e : *errors) state.errors.push_back(std::move(e));
          continue;
        }
        // Expired ones are dropped at the next write; until then they are shown as expired.
        state.declarations.push_back(std::get<Declaration>(std::move(parsed)));
      }
    }
  }
  for (const auto& e : state.errors) {
    spdlog::error(
        "msg=\"declaration state file rejected; the API refuses writes until it is fixed\" "
        "error=\"{}\"",
        LogfmtEscape(e.ToString()));
  }
  return state;
}

void DeclarationStore::Refresh() {
  std::lock_guard<std::mutex> refreshing(refresh_mu_);
  RefreshLocked(false);
}

// refresh_mu_ is held: dropins_ changes only here, so it can be read, then replaced.
void DeclarationStore::RefreshLocked(bool reparse) {
  std::string dir;
  Millis max_duration;
  std::map<std::string, DropIn> previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dir = spec_.dropin_dir;
    max_duration = spec_.max_duration;
    previous = dropins_;
  }
  const WallTime now = std::chrono::system_clock::now();
  std::map<std::string, DropIn> next;
  std::error_code ec;
  if (!dir.empty()) {
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      const std::string path = entry.path().string();
      if (!IsDropInName(name)) continue;
      struct stat st {};
      if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      const std::string fingerprint = std::to_string(st.st_mtim.tv_sec) + "." +
                                      std::to_string(st.st_mtim.tv_nsec) + "/" +
                                      std::to_string(st.st_size);
      auto old = previous.find(path);
      const bool same = old != previous.end() && old->second.fingerprint == fingerprint;
      if (same && !reparse) {
        next[path] = old->second;
        continue;
      }
      const WallTime first_seen = same ? old->second.first_seen : now;
      DropIn parsed{fingerprint, first_seen, std::nullopt, {}};
      if (!IsPlainFileName(name)) {
        parsed.errors.push_back({dir + "/" + LogfmtEscape(name), 0, 0, "",
                                 "file name: expected letters, digits, '_', '.' and '-'"});
      } else if (st.st_size > kMaxDropInBytes) {
        parsed.errors.push_back(
            {path, 0, 0, "", "larger than " + std::to_string(kMaxDropInBytes) + " bytes"});
      } else {
        parsed = ParseDropIn(path, fingerprint, ToWallTime(st.st_mtim), first_seen, max_duration);
      }
      for (const auto& e : parsed.errors) {
        spdlog::error("msg=\"declaration file rejected; the others keep working\" error=\"{}\"",
                      LogfmtEscape(e.ToString()));
      }
      if (parsed.declaration) {
        spdlog::info("msg=\"declaration loaded\" declaration=\"{}\"",
                     LogfmtEscape(parsed.declaration->Describe()));
      }
      next[path] = std::move(parsed);
    }
  }
  for (const auto& [path, old] : previous) {
    if (!next.count(path) && old.declaration) {
      spdlog::info("msg=\"declaration file removed\" file=\"{}\"", LogfmtEscape(path));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  dropins_ = std::move(next);
}

DeclarationStore::DropIn DeclarationStore::ParseDropIn(const std::string& path,
                                                       const std::string& fingerprint,
                                                       WallTime written, WallTime first_seen,
                                                       Millis max_duration) {
  DropIn parsed;
  parsed.fingerprint = fingerprint;
  parsed.first_seen = first_seen;
  const auto text = ReadWhole(path);
  if (!text) {
    parsed.errors.push_back({path, 0, 0, "", "cannot read file"});
    return parsed;
  }
  if (written > first_seen) {
    spdlog::warn(
        "msg=\"declaration file written in the future; its maximum runs from now\" "
        "file=\"{}\" mtime={}",
        LogfmtEscape(path), FormatRfc3339(written));
  }
  DeclarationRules rules;
  rules.max_duration = max_duration;
  // From when the file was written (touching it cannot extend it), but never later than when
  // this process first saw it: a future mtime would stretch the maximum.
  rules.now = std::min(written, first_seen);
  rules.allow_expired = true;
  auto result = ParseDeclarationText(*text, path, rules);
  if (auto* errors = std::get_if<std::vector<ConfigError>>(&result)) {
    parsed.errors = std::move(*errors);
    return parsed;
  }
  Declaration d = std::get<Declaration>(std::move(result));
  d.id = std::filesystem::path(path).filename().string();
  d.source = "file";
  d.origin = path;
  if (d.author.empty()) d.author = "file " + d.id;
  parsed.declaration = std::move(d);
  return parsed;
}

std::vector<Declaration> DeclarationStore::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Declaration> out = spec_.declarations;
  for (const auto& [path, dropin] : dropins_) {
    if (dropin.declaration) out.push_back(*dropin.declaration);
  }
  out.insert(out.end(), api_.begin(), api_.end());
  out.insert(out.end(), silences_.declarations.begin(), silences_.declarations.end());
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

DeclarationsView DeclarationStore::View() const {
  DeclarationsView view{All(), FileErrors(), {}, {}, {}};
  std::lock_guard<std::mutex> lock(mu_);
  view.silence_sources = silences_.sources;
  view.silence_errors = silences_.rejected;
  view.page_silences = silences_.page_silences;
  return view;
}

// mu_ is held.
std::optional<std::string> DeclarationStore::WritesRefused(StoreRefusal* refusal) const {
  if (!state_errors_.empty()) {
    *refusal = StoreRefusal::kStateFileRejected;
    return "the state file " + spec_.state_file + " was rejected (" +
           state_errors_.front().ToString() +
           "); fix or remove it and reload: nothing is written to it until then";
  }
  if (spec_.state_file.empty()) {
    *refusal = StoreRefusal::kNotPersisted;
    return std::string(
        "no suppressions.state_file is configured: API declarations would not survive a "
        "restart");
  }
  return std::nullopt;
}

// Disk I/O: called with write_mu_ held, never mu_.
bool DeclarationStore::Persist(const std::string& path, const std::vector<Declaration>& api,
                               std::string* error) const {
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
  // Every text was checked to be UTF-8 when parsed; `replace` keeps dump() from ever throwing.
  const std::string text = JsonText(list, 2) + "\n";
  return writer_(path, text, error);
}

std::variant<Declaration, std::vector<ConfigError>> DeclarationStore::Add(
    const std::string& body, WallTime now, const std::optional<std::string>& author,
    StoreRefusal* refusal) {
  StoreRefusal ignored;
  if (!refusal) refusal = &ignored;
  *refusal = StoreRefusal::kNone;
  DeclarationRules rules;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rules.max_duration = spec_.max_duration;
  }
  rules.now = now;
  rules.allow_duration = true;
  rules.author = author;
  auto parsed = ParseDeclarationText(body, "request body", rules);
  if (std::holds_alternative<std::vector<ConfigError>>(parsed)) {
    *refusal = StoreRefusal::kInvalid;
    return parsed;
  }
  Declaration d = std::get<Declaration>(std::move(parsed));
  d.id = RandomId();
  d.source = "api";
  d.origin = "api";
  // api_ changes only under write_mu_: what is read here is still current when the write
  // lands, and mu_ (every round's) is free while the file is written.
  std::lock_guard<std::mutex> writing(write_mu_);
  std::vector<Declaration> next;
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto why = WritesRefused(refusal)) {
      return std::vector<ConfigError>{{spec_.state_file, 0, 0, "suppressions.state_file", *why}};
    }
    for (const auto& old : api_) {
      if (old.ActiveAt(now)) next.push_back(old);
    }
    path = spec_.state_file;
  }
  if (next.size() >= kMaxApiDeclarations) {
    *refusal = StoreRefusal::kTooMany;
    return std::vector<ConfigError>{
        {"", 0, 0, "",
         "already " + std::to_string(next.size()) + " API declarations in force; remove some"}};
  }
  next.push_back(d);
  std::string error;
  if (!Persist(path, next, &error)) {
    *refusal = StoreRefusal::kNotPersisted;
    return std::vector<ConfigError>{{"", 0, 0, "", error}};
  }
  std::lock_guard<std::mutex> lock(mu_);
  api_ = std::move(next);
  spdlog::info("msg=\"declaration added\" declaration=\"{}\"", LogfmtEscape(d.Describe()));
  return d;
}

std::string DeclarationStore::Remove(const std::string& id, bool* not_found,
                                     StoreRefusal* refusal) {
  StoreRefusal ignored;
  if (!refusal) refusal = &ignored;
  *refusal = StoreRefusal::kNone;
  *not_found = false;
  std::lock_guard<std::mutex> writing(write_mu_);  // see Add
  std::vector<Declaration> next;
  std::string path;
  std::string described;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto why = NotRemovable(id, refusal)) return *why;
    // Before "not found": a rejected state file may hold it.
    if (auto why = WritesRefused(refusal)) return *why;
    auto it = std::find_if(api_.begin(), api_.end(), [&](const auto& d) { return d.id == id; });
    if (it == api_.end()) {
      *not_found = true;
      *refusal = StoreRefusal::kNotFound;
      return "no declaration " + id;
    }
    described = it->Describe();
    const auto now = std::chrono::system_clock::now();
    for (const auto& d : api_) {
      if (d.id != id && d.ActiveAt(now)) next.push_back(d);
    }
    path = spec_.state_file;
  }
  std::string error;
  if (!Persist(path, next, &error)) {
    *refusal = StoreRefusal::kNotPersisted;
    return error;
  }
  spdlog::info("msg=\"declaration removed\" declaration=\"{}\"", LogfmtEscape(described));
  std::lock_guard<std::mutex> lock(mu_);
  api_ = std::move(next);
  return "";
}

// mu_ is held. Why `id` cannot be removed through the API, when it is declared elsewhere.
std::optional<std::string> DeclarationStore::NotRemovable(const std::string& id,
                                                          StoreRefusal* refusal) const {
  for (const auto& d : spec_.declarations) {
    if (d.id == id) {
      *refusal = StoreRefusal::kNotRemovable;
      return "declared in the config file " + d.origin + "; remove it there";
    }
  }
  for (const auto& [path, dropin] : dropins_) {
    if (dropin.declaration && dropin.declaration->id == id) {
      *refusal = StoreRefusal::kNotRemovable;
      return "declared in the drop-in file " + path + "; delete that file";
    }
  }
  for (const auto& d : silences_.declarations) {
    if (d.id == id) {
      *refusal = StoreRefusal::kNotRemovable;
      return "declared as a silence in Alertmanager (" + d.origin +
             "); expire it there: amtool silence expire " + id.substr(3);
    }
  }
  return std::nullopt;
}

SilenceRefresher::SilenceRefresher(std::shared_ptr<DeclarationStore> store)
    : store_(std::move(store)) {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      // While off, look every second: a reload may turn it on (or off: then it clears).
      const Millis interval = store_->SilenceRefreshInterval().value_or(Millis(1000));
      if (cv_.wait_for(lock, interval, [this] { return stop_; })) return;
      lock.unlock();
      Guarded("silence reader", [this] { store_->RefreshSilences(); });
      lock.lock();
    }
  });
}

SilenceRefresher::~SilenceRefresher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace sbd
