// Debian's HTML Tidy as the status page's HTML5 validator and accessibility checker, shared by
// the unit tests (pages rendered in process) and the browser test (pages as served).
#pragma once

#include <string>
#include <vector>

namespace sbd::testing {

/// What tidy said about one HTML file. Plain value type.
struct TidyReport {
  int exit_code = -1;                 ///< 0 clean, 1 HTML warnings, 2 errors; 127 no tidy
  std::string output;                 ///< every message, one a line, each ending "(ID)"
  std::vector<std::string> findings;  ///< the messages that are not excluded (see below)
};

/// Runs `tidy -q -e --accessibility-check 3 --mute-id yes FILE`: -e reports errors and
/// warnings only (exit 1 with warnings, 2 with errors); the page's HTML5 doctype selects
/// tidy's HTML5 rules; --accessibility-check 3 runs all three priorities of its (WCAG 1.0
/// based) checks, which print "Access:" lines but leave the exit status at 0; --mute-id names
/// each message. The findings leave out, because tidy 5.6's --mute does not reach accessibility
/// messages, these exclusions and their reasons:
/// - TABLE_MISSING_SUMMARY: the summary attribute is obsolete in HTML5 (an error for an HTML5
///   validator); every table has a <caption> and scoped header cells instead.
/// - STYLESHEETS_REQUIRE_TESTING_STYLE_ELEMENT: a reminder printed for any <style>, not a
///   finding; the page reads in order without its style sheet (headings, tables, lists).
/// - With `refreshing` (GET /, which refreshes by itself as issue 14 asks) REMOVE_AUTO_REFRESH
///   and METADATA_MISSING_REDIRECT_AUTOREFRESH: the page links to GET /?refresh=off, which is
///   checked without them.
TidyReport TidyHtml(const std::string& file, bool refreshing);

}  // namespace sbd::testing
