// Shared by the fuzz targets whose parser reads a file: the input is written to one scratch
// file per process, rewritten for every input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace sbd::fuzz {

/// Writes the input to /tmp/sbd-fuzz-<pid><suffix> and returns that path.
inline std::string InputFile(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path =
      "/tmp/sbd-fuzz-" + std::to_string(static_cast<long>(getpid())) + suffix;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace sbd::fuzz
