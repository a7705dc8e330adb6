#include "detector/common/build_info.h"

// Written by CMake when it configures (git describe, branch, compiler).
#include "sbd_build_version.h"

namespace sbd {

const BuildInfo& GetBuildInfo() {
  static const BuildInfo info{SBD_VERSION, SBD_REVISION, SBD_BRANCH, SBD_COMPILER};
  return info;
}

std::string VersionText() {
  const BuildInfo& info = GetBuildInfo();
  return std::string("splitbrain-detector, version ") + info.version + " (branch: " + info.branch +
         ", revision: " + info.revision + ")\n  compiler: " + info.compiler + "\n";
}

}  // namespace sbd
