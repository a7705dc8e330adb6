#include "suppressors/silence_matchers.h"

#include <re2/re2.h>

#include "detector/common/logfmt.h"

namespace sbd {
namespace {

// 1 when `text` matches, 0 when it does not, -1 when the pattern is not valid RE2 (or too
// large): Alertmanager itself would have refused such a silence, but what we cannot read may
// match either way. Alertmanager anchors a matcher's regex at both ends; so do we.
int RegexMatch(const std::string& pattern, const std::string& text) {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(1 << 20);  // an untrusted pattern: bounded compiled size
  const RE2 re("^(?:" + pattern + ")$", options);
  if (!re.ok()) return -1;
  return RE2::FullMatch(text, re) ? 1 : 0;
}

}  // namespace

bool RegexMayMatch(const std::string& pattern, const std::string& text) {
  return RegexMatch(pattern, text) != 0;
}

bool MatchersMayMatch(const std::vector<SilenceMatcher>& matchers,
                      const std::map<std::string, std::string>& labels) {
  for (const auto& m : matchers) {
    const auto it = labels.find(m.name);
    const std::string value = it == labels.end() ? "" : it->second;
    // -1 (a pattern not understood) may match either way: the silence may hide the alert.
    const int matches = m.is_regex ? RegexMatch(m.value, value) : (m.value == value ? 1 : 0);
    if (m.is_equal ? matches == 0 : matches == 1) return false;
  }
  return true;
}

std::string FormatMatchers(const std::vector<SilenceMatcher>& matchers) {
  std::string out = "{";
  for (const auto& m : matchers) {
    if (out.size() > 1) out += ", ";
    out += LogfmtEscape(m.name) + (m.is_equal ? "" : "!") + (m.is_regex ? "=~" : "=") + "\"" +
           LogfmtEscape(m.value) + "\"";
  }
  return out + "}";
}

}  // namespace sbd
