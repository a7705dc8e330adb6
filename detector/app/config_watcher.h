// The detector's watch on files it reads besides its config: drop-in declarations and
// file_sd target files.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "suppressors/declaration_store.h"

namespace sbd {

/// Every second, on a thread of its own, re-reads the drop-in declarations into `store` and
/// fingerprints the files the file_sd globs match; when the fingerprint changes it sends this
/// process SIGHUP, so a target file change reloads the config as SIGHUP does. Thread-safe.
class ConfigFileWatcher {
 public:
  /// Starts the thread; its first fingerprint is of `globs` as they are then.
  ConfigFileWatcher(std::shared_ptr<DeclarationStore> store, std::vector<std::string> globs);
  /// Stops the thread if Stop() has not.
  ~ConfigFileWatcher();
  ConfigFileWatcher(const ConfigFileWatcher&) = delete;
  ConfigFileWatcher& operator=(const ConfigFileWatcher&) = delete;

  /// The globs of a reloaded config, fingerprinted from the next second on.
  void SetGlobs(std::vector<std::string> globs);
  /// Stops the thread and waits for it; idempotent.
  void Stop();

 private:
  void Run();

  std::shared_ptr<DeclarationStore> store_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::string> globs_;
  std::thread thread_;
};

}  // namespace sbd
