// What a Redis server answers to INFO and a sentinel to SENTINEL master, as anything listening
// on the member's or the sentinel's port could make it.
#include <cstdint>
#include <string>
#include <vector>

#include "probes/redis_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  sbd::ParseRedisInfo(text);
  sbd::RedisReading reading;
  sbd::ParseMinReplicasToWrite(text, reading);
  // The same bytes as a sentinel's field list, split at NUL bytes.
  std::vector<std::string> fields(1);
  for (char c : text) {
    if (c == '\0') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  std::vector<std::string> addr(fields.begin(),
                                fields.begin() + std::min<size_t>(2, fields.size()));
  sbd::ParseSentinelMaster(fields, addr);
  return 0;
}
