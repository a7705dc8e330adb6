#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace sbd {

/// The longest line of Prometheus text a parser accepts; a longer one is an error.
constexpr size_t kMaxExpositionLineBytes = 64 * 1024;

/// One sample of the Prometheus text exposition format (0.0.4): a series and its value
/// (NaN and +-Inf included). A timestamp, when present, is checked and dropped.
struct ExpositionSample {
  std::string metric;
  std::vector<std::pair<std::string, std::string>> labels;  ///< in the order written, unescaped
  double value = 0;
  size_t line = 0;  ///< 1-based, for messages
  /// The value of label `name`, or nullptr when the series has none.
  const std::string* Label(const std::string& name) const;
};

/// Parses every line of `text` as Prometheus does (comments and blank lines skipped; label
/// values unescaped from \" \\ \n and required to be UTF-8) and returns the samples of
/// `metric` only. Errors, with the line number and never the line's bytes: a malformed line,
/// a line over kMaxExpositionLineBytes, a label named twice in a series, and the same series
/// of `metric` twice. Pure; thread-safe.
std::variant<std::vector<ExpositionSample>, std::string> ParseExposition(std::string_view text,
                                                                         const std::string& metric);

}  // namespace sbd
