// One declaration document: a drop-in file, an API body, or the state file's entries. The
// first byte picks the rules, so every kind of source is fuzzed.
#include <cstdint>
#include <string>

#include "detector/config/declaration.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  sbd::DeclarationRules rules;
  rules.now = sbd::WallTime(std::chrono::seconds(1795000000));  // 2026-11-18
  rules.allow_duration = (data[0] & 1) != 0;
  rules.allow_identity = (data[0] & 2) != 0;
  rules.allow_expired = (data[0] & 4) != 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  sbd::ParseDeclarationText(text, "fuzz.yml", rules);
  return 0;
}
