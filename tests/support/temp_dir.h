// The test harness's one temporary directory class.
//
// Kept apart from files.h so that the sandbox headers which hand a TempDir to their users
// (alertmanager_sandbox.h, patroni_sandbox.h) do not also export the file helpers' common names
// (ReadFile, WriteFile, Trim, ...) into every file that includes them.
#pragma once

#include <string>

namespace sbd::testing {

/// A directory created with mkdtemp as /tmp/<prefix>-XXXXXX (no '-' is added when `prefix`
/// already ends with one), mode 0755, and owned by the `postgres` OS user when we run as root and
/// that user exists, so that PostgreSQL and Patroni, which run as postgres, can work in it.
/// Removed recursively by the destructor. Non-copyable.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "sbd-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace sbd::testing
