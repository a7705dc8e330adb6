// Declarations kept in the Alertmanager cluster as silences: declared once with amtool,
// replicated by Alertmanager's gossip, seen by every detector replica.
//
//   amtool silence add splitbrain_declaration=rebuilding cluster=orders --duration=4h
//     --comment="building the v17 cluster beside orders (CHG-1234)"   (one command line)
//
// No alert carries `splitbrain_declaration`, so such a silence silences nothing: it is a
// record. Every active silence, a declaration's included, is also matched (Alertmanager's
// semantics: =, !=, =~, !~, anchored RE2, an absent label is "") against the full label set of
// every page the detector sends (spec.page_labels, built by PageLabelSets in
// detector/output/alerts.h): one that matches mutes the page and is reported as such.
// Every byte of an Alertmanager's answer is untrusted.
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "detector/config/declaration.h"

namespace sbd {

/// The matcher that makes a silence a declaration.
constexpr const char* kDeclarationMatcher = "splitbrain_declaration";

/// A silence worth telling about: a declaration refused (and why), or one that hides the page.
/// Plain value type.
struct SilenceFinding {
  std::string silence_id;
  std::string alertmanagers;  ///< the Alertmanagers that list it, credentials removed
  std::string message;
  /// "silence <id> (<alertmanagers>): <message>".
  std::string ToString() const;
};

/// What one Alertmanager's GET /api/v2/silences says. Plain value type.
struct SilenceReadout {
  /// Active declaration silences, as declarations (id "am:<silence id>").
  std::vector<Declaration> declarations;
  /// Declaration silences this Alertmanager lists as expired, with when they ended: a copy
  /// still active elsewhere (gossip lag, a stopped peer) ends then too.
  std::map<std::string, WallTime> ended;
  std::vector<SilenceFinding> rejected;
  std::vector<SilenceFinding> page_silences;
};

/// Parses the answer of GET /api/v2/silences from `alertmanager` (shown, credentials
/// removed). A silence that is not a well-formed object is reported and skipped; a body that
/// is not a JSON list is an error (the string). Never throws. Thread-safe (pure).
std::variant<SilenceReadout, std::string> ParseSilences(const std::string& body,
                                                        const std::string& alertmanager,
                                                        WallTime now, Millis max_duration,
                                                        const AlertmanagerSilencesSpec& spec);

/// How one Alertmanager answered its last read. Plain value type.
struct SilenceSourceStatus {
  std::string alertmanager;  ///< credentials removed
  bool up = false;
  double last_success_unix = 0;  ///< 0 before the first good read
  std::string error;             ///< why the last read failed; "" when up
};

/// Everything the silences contribute at one instant, merged across Alertmanagers.
struct SilenceDeclarations {
  std::vector<Declaration> declarations;  ///< active ones, merged by silence id
  std::vector<SilenceFinding> rejected;
  std::vector<SilenceFinding> page_silences;
  std::vector<SilenceSourceStatus> sources;
};

/// Merges readouts: a silence listed by several Alertmanagers is one declaration that ends at
/// the earliest end any of them gives (an expiry is never extended); one listed as ended by
/// any of them ends then. Only what is active at `now` is kept. Pure.
SilenceDeclarations MergeSilences(const std::vector<SilenceReadout>& readouts, WallTime now);

}  // namespace sbd
