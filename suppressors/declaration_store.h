// Where declarations live while the detector runs: the config's, the drop-in directory's (one
// YAML file each, re-read when it changes), and the HTTP API's (kept in a state file so that
// they survive a restart). Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "detector/config.h"
#include "suppressors/declaration.h"

namespace sbd {

/// What the exporter shows: every declaration and every rejected file.
struct DeclarationsView {
  std::vector<Declaration> all;
  std::vector<ConfigError> errors;
};

class DeclarationStore {
 public:
  /// Loads the state file (a missing one is empty; an unreadable or malformed one is an
  /// error kept in FileErrors(), and the API then refuses writes rather than lose it).
  explicit DeclarationStore(const SuppressionsSpec& spec);

  /// Re-reads the drop-in directory: new, changed and removed files. Cheap when nothing
  /// changed (one stat per file). A malformed file is an error with file, line and column;
  /// the other files keep working.
  void Refresh();

  /// Every declaration (config, files, API), expired ones included, in that order.
  std::vector<Declaration> All() const;
  /// The ones in force at `now`.
  std::vector<Declaration> Active(WallTime now) const;
  /// Drop-in files (and the state file) currently rejected, with where and why.
  std::vector<ConfigError> FileErrors() const;
  DeclarationsView View() const { return {All(), FileErrors()}; }

  /// POST: a JSON (or YAML) body with kind, cluster, [scope], [member], reason, author and
  /// expires or duration. Persists before it answers; returns the declaration or the errors.
  std::variant<Declaration, std::vector<ConfigError>> Add(const std::string& body, WallTime now);
  /// DELETE: only API declarations can be removed this way. Returns "" on success, else why
  /// (and whether it was not found: `*not_found`).
  std::string Remove(const std::string& id, bool* not_found);

 private:
  struct DropIn {
    std::string fingerprint;  ///< mtime and size when parsed
    std::optional<Declaration> declaration;
    std::vector<ConfigError> errors;
  };
  bool Persist(const std::vector<Declaration>& api, std::string* error) const;
  void LoadState();

  SuppressionsSpec spec_;
  mutable std::mutex mu_;
  std::map<std::string, DropIn> dropins_;  ///< by path
  std::vector<Declaration> api_;
  std::vector<ConfigError> state_errors_;
};

}  // namespace sbd
