// A Prometheus file_sd target file (JSON or YAML), as whatever tool writes them could make it.
#include <cstdint>

#include "detector/config/file_sd.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sbd::ReadFileSdTargets({sbd::fuzz::InputFile(data, size, "-targets.json")});
  return 0;
}
