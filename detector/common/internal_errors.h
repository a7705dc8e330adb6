// The last line of defence: a task that throws is logged and counted, and the thread that ran
// it carries on. Every background thread's loop body runs through Guarded().
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <string>

namespace sbd {

/// Logs `what` went wrong in `where` and counts it. Thread-safe.
void CountInternalError(const char* where, const std::string& what);

/// How many internal errors this process has counted (splitbrain_internal_errors_total).
/// Thread-safe.
std::uint64_t InternalErrors();

/// Runs `task`; an exception it throws is counted and logged, never propagated. Returns false
/// when it threw.
bool Guarded(const char* where, const std::function<void()>& task);

}  // namespace sbd
