#include "tests/support/html_tidy.h"

#include <algorithm>
#include <sstream>

#include "tests/support/process.h"

namespace sbd::testing {
namespace {

bool EndsWith(const std::string& line, const std::string& suffix) {
  return line.size() >= suffix.size() &&
         line.compare(line.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TidyReport TidyHtml(const std::string& file, bool refreshing) {
  TidyReport report;
  const std::string tidy = FindExecutable("tidy");
  if (tidy.empty()) {
    report.exit_code = 127;
    report.output = "tidy not found (apt-get install tidy; scripts/install-deps has it)";
    report.findings = {report.output};
    return report;
  }
  const CommandResult run =
      RunCommand({tidy, "-q", "-e", "--accessibility-check", "3", "--mute-id", "yes", file});
  report.exit_code = run.exit_code;
  report.output = run.output;
  std::vector<std::string> excluded = {"(TABLE_MISSING_SUMMARY)",
                                       "(STYLESHEETS_REQUIRE_TESTING_STYLE_ELEMENT)"};
  if (refreshing) {
    excluded.push_back("(REMOVE_AUTO_REFRESH)");
    excluded.push_back("(METADATA_MISSING_REDIRECT_AUTOREFRESH)");
  }
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    const bool muted = std::any_of(excluded.begin(), excluded.end(),
                                   [&](const std::string& id) { return EndsWith(line, id); });
    if (!line.empty() && !muted) report.findings.push_back(line);
  }
  return report;
}

}  // namespace sbd::testing
