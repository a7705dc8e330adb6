// The --web.config.file (TLS and basic auth settings), read by path.
#include <cstdint>

#include "detector/output/exporter.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sbd::LoadWebConfig(sbd::fuzz::InputFile(data, size, "-web.yml"));
  return 0;
}
