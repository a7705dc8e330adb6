#include "suppressors/alertmanager_silences.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "detector/common/logfmt.h"
#include "probes/json_fields.h"
#include "suppressors/silence_matchers.h"

namespace sbd {
namespace {

using Json = nlohmann::json;

constexpr const char* kKindHint = "expected provisioning, rebuilding, cutover or decommissioning";

// A string member of `object`, or nullopt when absent or of another type.
std::optional<std::string> StringField(const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// Why `value` is not one line of printable UTF-8 of 1 to `max_bytes` bytes; "" when it is.
std::string TextProblem(const std::string& value, size_t max_bytes) {
  if (value.empty()) return "empty";
  if (value.size() > max_bytes) return "longer than " + std::to_string(max_bytes) + " bytes";
  for (size_t i = 0; i < value.size();) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7F) return "not one line of text (control character)";
    const size_t length = Utf8SequenceLength(value, i);
    if (length == 0) return "not valid UTF-8";
    i += length;
  }
  return "";
}

bool IsName(const std::string& s) {
  return !s.empty() && s.size() <= 200 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

bool IsSilenceId(const std::string& s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
  });
}

// The matchers of a silence; "" problem when every one is well-typed.
std::vector<SilenceMatcher> ReadMatchers(const Json& silence, std::string* problem) {
  std::vector<SilenceMatcher> out;
  const auto it = silence.find("matchers");
  if (it == silence.end() || !it->is_array() || it->empty()) {
    *problem = "matchers: expected a non-empty list";
    return out;
  }
  for (const auto& m : *it) {
    SilenceMatcher matcher;
    const auto name = m.is_object() ? StringField(m, "name") : std::nullopt;
    const auto value = m.is_object() ? StringField(m, "value") : std::nullopt;
    const auto regex = m.is_object() ? m.find("isRegex") : m.end();
    const auto equal = m.is_object() ? m.find("isEqual") : m.end();
    if (!name || !value || regex == m.end() || !regex->is_boolean() ||
        (equal != m.end() && !equal->is_boolean())) {
      *problem = "matchers: expected objects with string name and value, boolean isRegex";
      if (name) out.push_back({*name, "", false, true});  // still tells a declaration apart
      continue;
    }
    matcher.name = *name;
    matcher.value = *value;
    matcher.is_regex = regex->get<bool>();
    matcher.is_equal = equal == m.end() || equal->get<bool>();
    out.push_back(std::move(matcher));
  }
  return out;
}

// One silence that carries the declaration matcher, already known to be active.
std::variant<Declaration, std::string> ToDeclaration(const Json& silence,
                                                     const std::vector<SilenceMatcher>& matchers,
                                                     WallTime starts, WallTime ends,
                                                     Millis max_duration) {
  Declaration d;
  std::set<std::string> seen;
  for (const auto& m : matchers) {
    const std::string shown = LogfmtEscape(m.name);
    if (m.name != kDeclarationMatcher && m.name != "cluster" && m.name != "scope" &&
        m.name != "member") {
      return "unexpected matcher " + shown +
             ": a declaration has only splitbrain_declaration, cluster, scope and member";
    }
    if (!seen.insert(m.name).second) return "matcher " + shown + " given twice";
    if (m.is_regex || !m.is_equal) {
      return "matcher " + shown + " must be an equality matcher (" + shown + "=value)";
    }
    if (m.name == kDeclarationMatcher) {
      bool known = false;
      for (auto k : {DeclarationKind::kProvisioning, DeclarationKind::kRebuilding,
                     DeclarationKind::kCutover, DeclarationKind::kDecommissioning}) {
        if (m.value == DeclarationKindName(k)) d.kind = k, known = true;
      }
      if (!known) {
        return "unknown kind " + std::string(kDeclarationMatcher) + "=\"" + LogfmtEscape(m.value) +
               "\": " + kKindHint;
      }
    } else if (!IsName(m.value)) {
      return "matcher " + shown + ": expected a name of letters, digits, '_', '.' and '-'";
    } else {
      (m.name == "cluster" ? d.cluster : m.name == "scope" ? d.scope : d.member) = m.value;
    }
  }
  if (d.cluster.empty()) return "no cluster matcher: add cluster=<the detector's cluster name>";
  d.reason = StringField(silence, "comment").value_or("");
  d.author = StringField(silence, "createdBy").value_or("");
  if (auto why = TextProblem(d.reason, kMaxReasonBytes); !why.empty()) return "comment: " + why;
  if (auto why = TextProblem(d.author, kMaxAuthorBytes); !why.empty()) return "createdBy: " + why;
  if (ends > AddSaturating(starts, max_duration)) {
    return "lasts from " + FormatRfc3339(starts) + " to " + FormatRfc3339(ends) +
           ", longer than the maximum " + FormatDuration(max_duration) +
           " (suppressions.max_duration); expire it and add one that ends sooner";
  }
  d.created = starts;
  d.expires = ends;
  return d;
}

// Reports `silence` when its matchers, with Alertmanager's semantics, match the full label
// set of any page the detector sends: once, for the first page it mutes.
void FlagPageSilence(const Json& silence, const std::string& id, const std::string& alertmanager,
                     const std::vector<SilenceMatcher>& matchers, WallTime ends,
                     const AlertmanagerSilencesSpec& spec, SilenceReadout* out) {
  for (const auto& labels : spec.page_labels) {
    if (!MatchersMayMatch(matchers, labels)) continue;
    const auto label = [&](const char* name) {
      const auto it = labels.find(name);
      return it == labels.end() ? std::string("?") : LogfmtEscape(it->second);
    };
    out->page_silences.push_back(
        {id, alertmanager,
         "silences the " + label("alertname") + " page of cluster " + label("cluster") + ": " +
             FormatMatchers(matchers) + " by " +
             LogfmtEscape(StringField(silence, "createdBy").value_or("?")) + " until " +
             FormatRfc3339(ends)});
    return;
  }
}

// Sorts one entry of the answer into `out`.
void ReadSilence(const Json& silence, const std::string& alertmanager, WallTime now,
                 Millis max_duration, const AlertmanagerSilencesSpec& spec, SilenceReadout* out) {
  const auto raw_id = silence.is_object() ? StringField(silence, "id") : std::nullopt;
  const std::string id = raw_id && IsSilenceId(*raw_id) ? *raw_id : "";
  std::string problem = id.empty() ? "id: expected a string of letters, digits and '-'" : "";
  const auto reject = [&](const std::string& why) {
    out->rejected.push_back({id.empty() ? "?" : id, alertmanager, why});
  };
  if (!silence.is_object()) return reject("expected a JSON object");
  const std::vector<SilenceMatcher> matchers = ReadMatchers(silence, &problem);
  const bool declaration =
      std::any_of(matchers.begin(), matchers.end(),
                  [](const SilenceMatcher& m) { return m.name == kDeclarationMatcher; });
  const auto status = silence.find("status");
  const auto state =
      status != silence.end() && status->is_object() ? StringField(*status, "state") : std::nullopt;
  const auto starts = ParseRfc3339(StringField(silence, "startsAt").value_or(""));
  const auto ends = ParseRfc3339(StringField(silence, "endsAt").value_or(""));
  if (problem.empty() && (!state || !starts || !ends)) {
    problem = "status.state, startsAt and endsAt: expected a state and two RFC 3339 times";
  }
  if (!problem.empty()) {
    // Only a silence meant as a declaration is ours to report; others are Alertmanager's.
    if (declaration) reject(problem);
    return;
  }
  if (*state != "active") {
    if (declaration && *state == "expired") out->ended[id] = std::min(*ends, now);
    return;
  }
  // Every active silence, a declaration's too: one with any other matcher (a regex on
  // splitbrain_declaration, lock_kind=...) may match a page, and then mutes it.
  FlagPageSilence(silence, id, alertmanager, matchers, *ends, spec, out);
  if (!declaration) return;
  auto result = ToDeclaration(silence, matchers, *starts, *ends, max_duration);
  if (auto* why = std::get_if<std::string>(&result)) return reject(*why);
  Declaration d = std::get<Declaration>(std::move(result));
  d.id = "am:" + id;
  d.source = "alertmanager";
  d.origin = alertmanager;
  out->declarations.push_back(std::move(d));
}

// Adds `alertmanager` to a comma-separated list once.
void AddOrigin(std::string* list, const std::string& alertmanager) {
  for (size_t at = 0; at <= list->size();) {
    const size_t end = std::min(list->find(", ", at), list->size());
    if (list->compare(at, end - at, alertmanager) == 0) return;
    at = end + 2;
  }
  *list += list->empty() ? alertmanager : ", " + alertmanager;
}

std::vector<SilenceFinding> MergeFindings(const std::vector<SilenceReadout>& readouts,
                                          std::vector<SilenceFinding> SilenceReadout::*field) {
  std::map<std::pair<std::string, std::string>, SilenceFinding> merged;
  for (const auto& r : readouts) {
    for (const auto& f : r.*field) {
      auto [it, inserted] = merged.emplace(std::make_pair(f.silence_id, f.message), f);
      if (!inserted) AddOrigin(&it->second.alertmanagers, f.alertmanagers);
    }
  }
  std::vector<SilenceFinding> out;
  for (auto& [key, f] : merged) out.push_back(std::move(f));
  return out;
}

}  // namespace

std::string SilenceFinding::ToString() const {
  return "silence " + LogfmtEscape(silence_id) + " (" + alertmanagers + "): " + message;
}

std::variant<SilenceReadout, std::string> ParseSilences(const std::string& body,
                                                        const std::string& alertmanager,
                                                        WallTime now, Millis max_duration,
                                                        const AlertmanagerSilencesSpec& spec) {
  auto parsed = ParseUntrustedJson(body);
  if (const auto* why = std::get_if<std::string>(&parsed)) {
    return "the answer is " + *why;  // "not JSON", or nested too deep to parse
  }
  const Json root = std::move(std::get<Json>(parsed));
  if (!root.is_array()) return std::string("the answer is not a JSON list of silences");
  SilenceReadout out;
  for (const auto& silence : root)
    ReadSilence(silence, alertmanager, now, max_duration, spec, &out);
  return out;
}

SilenceDeclarations MergeSilences(const std::vector<SilenceReadout>& readouts, WallTime now) {
  std::map<std::string, WallTime> ended;
  std::map<std::string, Declaration> merged;
  for (const auto& r : readouts) {
    for (const auto& [id, at] : r.ended) {
      auto [it, inserted] = ended.emplace("am:" + id, at);
      if (!inserted) it->second = std::min(it->second, at);
    }
    for (const auto& d : r.declarations) {
      auto [it, inserted] = merged.emplace(d.id, d);
      if (inserted) continue;
      it->second.expires = std::min(it->second.expires, d.expires);
      AddOrigin(&it->second.origin, d.origin);
    }
  }
  SilenceDeclarations out;
  for (auto& [id, d] : merged) {
    if (const auto end = ended.find(id); end != ended.end()) {
      d.expires = std::min(d.expires, end->second);
    }
    if (d.ActiveAt(now)) out.declarations.push_back(std::move(d));
  }
  out.rejected = MergeFindings(readouts, &SilenceReadout::rejected);
  out.page_silences = MergeFindings(readouts, &SilenceReadout::page_silences);
  return out;
}

}  // namespace sbd
