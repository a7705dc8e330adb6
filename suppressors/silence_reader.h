// Reading declarations from every configured Alertmanager, and what is kept while one cannot
// be read (see alertmanager_silences.h for what a declaration silence is).
#pragma once

#include <map>
#include <set>
#include <string>

#include "suppressors/alertmanager_silences.h"

namespace sbd {

/// Reads the silences of every configured Alertmanager at once, each with its own deadline
/// (spec.timeout), and keeps what an unreadable one said last until each declaration's own
/// expiry. Not thread-safe: one Read at a time (the store serializes them).
class AlertmanagerSilenceReader {
 public:
  SilenceDeclarations Read(const AlertmanagerSilencesSpec& spec, Millis max_duration, WallTime now);

 private:
  /// Logs what appeared since the last Read: declarations, rejected silences, and (a warning)
  /// silences that hide the page.
  void LogChanges(const SilenceDeclarations& next);

  std::map<std::string, SilenceReadout> last_;         ///< by URL: the last good readout
  std::map<std::string, SilenceSourceStatus> status_;  ///< by URL
  std::set<std::string> logged_;  ///< what LogChanges has told about and is still there
};

}  // namespace sbd
