#include "detector/app/config_watcher.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <utility>

#include "detector/common/internal_errors.h"
#include "detector/config/file_sd.h"

namespace sbd {

ConfigFileWatcher::ConfigFileWatcher(std::shared_ptr<DeclarationStore> store,
                                     std::vector<std::string> globs)
    : store_(std::move(store)), globs_(std::move(globs)) {
  thread_ = std::thread([this] { Run(); });
}

ConfigFileWatcher::~ConfigFileWatcher() { Stop(); }

void ConfigFileWatcher::SetGlobs(std::vector<std::string> globs) {
  std::lock_guard<std::mutex> lock(mu_);
  globs_ = std::move(globs);
}

void ConfigFileWatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ConfigFileWatcher::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  std::string fingerprint = FileSdFingerprint(globs_);
  while (!cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; })) {
    const std::vector<std::string> globs = globs_;
    lock.unlock();
    Guarded("file watcher", [&] {
      store_->Refresh();
      const std::string now = FileSdFingerprint(globs);
      if (now != fingerprint) {
        fingerprint = now;
        spdlog::info("msg=\"file_sd targets changed; reloading\"");
        kill(getpid(), SIGHUP);
      }
    });
    lock.lock();
  }
}

}  // namespace sbd
