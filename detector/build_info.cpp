#include "detector/build_info.h"

// Defined for this file only (CMakeLists.txt), so a new revision recompiles just this file.
#ifndef SBD_VERSION
#error "SBD_VERSION must be defined by the build"
#endif

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
