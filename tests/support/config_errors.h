// The error lines of a config that failed to validate, as `file:line:column: key: message`,
// for the config tests to compare; empty when the config is valid.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"

namespace sbd::testing {

inline std::vector<std::string> ConfigErrorLines(const sbd::ConfigResult& result) {
  std::vector<std::string> lines;
  if (const auto* errors = std::get_if<std::vector<sbd::ConfigError>>(&result)) {
    for (const sbd::ConfigError& e : *errors) lines.push_back(e.ToString());
  }
  return lines;
}

}  // namespace sbd::testing
