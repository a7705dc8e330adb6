// Alertmanager silence matchers, evaluated against the detector's own page to tell whether a
// silence hides it. Regular expressions are untrusted: they are run by RE2 (the syntax
// Alertmanager's Go regexp accepts; linear time, bounded memory), never by a backtracking engine.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace sbd {

/// One matcher of a silence: name="value", name!="value", name=~"re" or name!~"re".
/// Plain value type.
struct SilenceMatcher {
  std::string name;
  std::string value;
  bool is_regex = false;
  bool is_equal = true;
};

/// True when `pattern` (RE2 syntax, anchored at both ends as Alertmanager anchors it) may
/// match `text`. A pattern RE2 cannot compile counts as a match: the caller errs towards
/// warning. Linear in pattern times text. Thread-safe (pure).
bool RegexMayMatch(const std::string& pattern, const std::string& text);

/// True when every matcher may match the label set (an absent label is ""), i.e. the silence
/// may silence an alert with these labels. Thread-safe (pure).
bool MatchersMayMatch(const std::vector<SilenceMatcher>& matchers,
                      const std::map<std::string, std::string>& labels);

/// `{alertname=~"SplitBrain.*", severity="critical"}`, values escaped for one log line.
std::string FormatMatchers(const std::vector<SilenceMatcher>& matchers);

}  // namespace sbd
