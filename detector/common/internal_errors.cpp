#include "detector/common/internal_errors.h"

#include <spdlog/spdlog.h>

#include <atomic>

#include "detector/common/logfmt.h"

namespace sbd {
namespace {

std::atomic<std::uint64_t> internal_errors{0};

}  // namespace

void CountInternalError(const char* where, const std::string& what) {
  internal_errors.fetch_add(1, std::memory_order_relaxed);
  // The message comes from an exception that may quote untrusted input.
  spdlog::error("msg=\"internal error; carrying on\" where={} error=\"{}\"", where,
                LogfmtEscape(what.substr(0, 512)));
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
