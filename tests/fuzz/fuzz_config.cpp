// The detector's YAML config. Inputs that mention file_sd are skipped: its patterns are
// globbed on this machine ("/*/*" would read every file under /), and the target files have
// their own target (fuzz_file_sd).
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "detector/config/config.h"

namespace {

// True when any scalar (key or value) is "file_sd", however the YAML spells it (or when the
// document is too big to tell: aliases can make a small text a huge tree).
bool MentionsFileSd(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const std::exception&) {
    return false;  // ParseConfig reports the same syntax error without reading anything
  }
  std::vector<YAML::Node> pending{root};
  for (size_t visited = 0; !pending.empty(); ++visited) {
    if (visited > 100000) return true;
    const YAML::Node node = pending.back();
    pending.pop_back();
    if (node.IsScalar() && node.Scalar() == "file_sd") return true;
    if (node.IsSequence()) {
      for (const auto& item : node) pending.push_back(item);
    } else if (node.IsMap()) {
      for (const auto& kv : node) {
        pending.push_back(kv.first);
        pending.push_back(kv.second);
      }
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Only a double-quoted escape can spell "file_sd" without the letters "file".
  const bool maybe = text.find("file") != std::string::npos || text.find('\\') != std::string::npos;
  if (maybe && MentionsFileSd(text)) return 0;
  sbd::ParseConfig(text, "fuzz.yml");
  return 0;
}
