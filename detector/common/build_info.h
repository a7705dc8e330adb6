#pragma once

#include <string>

namespace sbd {

/// What the running binary was built from, fixed when CMake configured the build (the
/// version from `git describe`). Constants: thread-safe.
struct BuildInfo {
  const char* version;
  const char* revision;
  const char* branch;
  const char* compiler;
};

/// This binary's build.
const BuildInfo& GetBuildInfo();

/// The `--version` text, as Prometheus' own binaries print it.
std::string VersionText();

}  // namespace sbd
