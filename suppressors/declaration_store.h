// Where declarations live while the detector runs: the config's, the drop-in directory's (one
// YAML file each, re-read when it changes), and the HTTP API's (kept in a state file so that
// they survive a restart). Thread-safe.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "detector/config/declaration.h"
#include "suppressors/silence_reader.h"

namespace sbd {

/// What the exporter shows: every declaration and every rejected file, and what the
/// Alertmanager silences say (empty when they are not read).
struct DeclarationsView {
  std::vector<Declaration> all;
  std::vector<ConfigError> errors;
  std::vector<SilenceSourceStatus> silence_sources;
  std::vector<SilenceFinding> silence_errors;  ///< declaration silences rejected, and why
  std::vector<SilenceFinding> page_silences;   ///< silences that hide the SplitBrain page
};

/// Why the store refused a write through the API, so that the HTTP layer can answer with the
/// right status.
enum class StoreRefusal {
  kNone,               ///< not refused
  kInvalid,            ///< the body is not a valid declaration (the caller's fault: 400)
  kNotFound,           ///< no declaration with that id (404)
  kNotRemovable,       ///< declared in the config or a drop-in file; remove it there (409)
  kStateFileRejected,  ///< the state file was rejected when read: nothing is written until it
                       ///< is fixed (and the store reloaded), so that it is not destroyed (409)
  kNotPersisted,       ///< no state file configured, or writing it failed (500)
  kTooMany,            ///< the most API declarations in force at once already are (409)
};

/// Writes `text` to `path` whole (a temporary file beside it, 0600, synced, renamed over it,
/// the directory synced): a crash or a concurrent writer leaves the old file or the new one.
/// False with the reason in `*error`. Thread-safe.
bool WriteFileAtomically(const std::string& path, const std::string& text, std::string* error);

/// How the store writes its state file: WriteFileAtomically unless a test injects another.
using StateFileWriter =
    std::function<bool(const std::string& path, const std::string& text, std::string* error)>;

/// Disk I/O (the state file's write, its reading on reload, the drop-in directory) never runs
/// under the mutex that Active(), All() and View() take: a round reads the declarations in
/// memory and never waits on a slow or hung disk. A hung write holds only the API request
/// that made it (and the writes queued behind it, one at a time).
class DeclarationStore {
 public:
  /// Loads the state file (a missing one is empty; an unreadable or malformed one is an
  /// error kept in FileErrors(), and the API then refuses writes rather than lose it), reads
  /// the drop-in directory and, when enabled, the Alertmanager silences (waiting up to their
  /// timeout), so that the first round already sees every declaration.
  explicit DeclarationStore(const SuppressionsSpec& spec, StateFileWriter writer = nullptr);

  /// Takes a reloaded config's suppressions in place, so that one store (and its mutex) serves
  /// the whole process life and no API write is lost between two stores:
  /// - the config's declarations are replaced;
  /// - the drop-in directory is re-read (every file re-parsed, as max_duration may have
  ///   changed); a file keeps the time it was first seen while its content is unchanged;
  /// - the same state file: the API declarations in memory are kept (the file holds the same
  ///   ones, and nothing re-reads it), unless it was rejected before: then it is read again, so
  ///   that fixing it and reloading re-enables the API;
  /// - another state file (or none): it is read as at start and its declarations replace the
  ///   API ones in memory; those of the old file stop counting (the safe direction: a page is
  ///   never hidden by a declaration no file holds).
  /// Thread-safe: Add, Remove, Refresh and the readers see the old spec or the new one.
  void Reload(const SuppressionsSpec& spec);

  /// Re-reads the drop-in directory: new, changed and removed files. Cheap when nothing
  /// changed (one stat per file). A malformed file is an error with file, line and column;
  /// the other files keep working. A file's max_duration runs from when it was written or
  /// first seen by this process, whichever is earlier (a future mtime counts as now, logged).
  void Refresh();

  /// Re-reads the Alertmanager silences (when suppressions.alertmanager_silences is enabled):
  /// every Alertmanager at once, each within its timeout. Runs beside Refresh, never blocking
  /// it; one at a time. What an unreadable Alertmanager said last stays until each
  /// declaration's own expiry.
  void RefreshSilences();
  /// How often RefreshSilences should run; nullopt while silences are not read.
  std::optional<Millis> SilenceRefreshInterval() const;

  /// Every declaration (config, files, API, Alertmanager silences), expired ones included,
  /// in that order.
  std::vector<Declaration> All() const;
  /// The ones in force at `now`.
  std::vector<Declaration> Active(WallTime now) const;
  /// Drop-in files (and the state file) currently rejected, with where and why.
  std::vector<ConfigError> FileErrors() const;
  DeclarationsView View() const;

  /// POST: a JSON (or YAML) body with kind, cluster, [scope], [member], reason, author and
  /// expires or duration. `author`, when given (the authenticated user), replaces the body's.
  /// Persists before it answers; returns the declaration or the errors, and why in `*refusal`
  /// when not null.
  std::variant<Declaration, std::vector<ConfigError>> Add(
      const std::string& body, WallTime now,
      const std::optional<std::string>& author = std::nullopt, StoreRefusal* refusal = nullptr);
  /// DELETE: only API declarations can be removed this way. Returns "" on success, else why
  /// (and whether it was not found: `*not_found`; the exact reason in `*refusal` when not
  /// null).
  std::string Remove(const std::string& id, bool* not_found, StoreRefusal* refusal = nullptr);

 private:
  struct DropIn {
    std::string fingerprint;  ///< mtime and size when parsed
    WallTime first_seen{};    ///< when this process first saw this fingerprint
    std::optional<Declaration> declaration;
    std::vector<ConfigError> errors;
  };
  struct StateFile {
    std::vector<Declaration> declarations;
    std::vector<ConfigError> errors;
  };
  static StateFile LoadState(const SuppressionsSpec& spec);
  static DropIn ParseDropIn(const std::string& path, const std::string& fingerprint,
                            WallTime written, WallTime first_seen, Millis max_duration);
  std::optional<std::string> WritesRefused(StoreRefusal* refusal) const;
  std::optional<std::string> NotRemovable(const std::string& id, StoreRefusal* refusal) const;
  bool Persist(const std::string& path, const std::vector<Declaration>& api,
               std::string* error) const;
  void RefreshLocked(bool reparse);

  const StateFileWriter writer_;
  std::mutex refresh_mu_;  ///< one Refresh or Reload at a time; taken before write_mu_
  /// One change of the API declarations at a time (Add, Remove, Reload), held across the
  /// state file's I/O; taken before mu_, which is never held during I/O.
  std::mutex write_mu_;
  std::mutex silence_mu_;                     ///< one RefreshSilences at a time; taken before mu_
  AlertmanagerSilenceReader silence_reader_;  ///< under silence_mu_
  mutable std::mutex mu_;                     ///< everything below
  SuppressionsSpec spec_;
  std::map<std::string, DropIn> dropins_;  ///< by path
  std::vector<Declaration> api_;           ///< changed under write_mu_ and mu_ both
  std::vector<ConfigError> state_errors_;  ///< changed under write_mu_ and mu_ both
  SilenceDeclarations silences_;
};

/// Calls store->RefreshSilences() every refresh_interval (re-read after each pass, so a reload
/// can turn it on or off) on a thread of its own, so that a hung Alertmanager never delays the
/// drop-in refresh, until destroyed. Not copyable.
class SilenceRefresher {
 public:
  explicit SilenceRefresher(std::shared_ptr<DeclarationStore> store);
  ~SilenceRefresher();
  SilenceRefresher(const SilenceRefresher&) = delete;
  SilenceRefresher& operator=(const SilenceRefresher&) = delete;

 private:
  std::shared_ptr<DeclarationStore> store_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace sbd
