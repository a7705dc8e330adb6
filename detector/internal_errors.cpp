#include "detector/internal_errors.h"

#include <spdlog/spdlog.h>

#include <atomic>

namespace sbd {
namespace {

std::atomic<std::uint64_t> internal_errors{0};

}  // namespace

void CountInternalError(const char* where, const std::string& what) {
  internal_errors.fetch_add(1, std::memory_order_relaxed);
  // The message comes from an exception that may quote untrusted input: JSON-escape it.
  std::string quoted;
  for (const char c : what.substr(0, 512)) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      quoted += ' ';
    } else {
      quoted += c;
    }
  }
  spdlog::error("msg=\"internal error; carrying on\" where={} error=\"{}\"", where, quoted);
}

std::uint64_t InternalErrors() { return internal_errors.load(std::memory_order_relaxed); }

bool Guarded(const char* where, const std::function<void()>& task) {
  try {
    task();
    return true;
  } catch (const std::exception& e) {
    CountInternalError(where, e.what());
  } catch (...) {
    CountInternalError(where, "unknown exception");
  }
  return false;
}

}  // namespace sbd
