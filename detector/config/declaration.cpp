#include "detector/config/declaration.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "detector/common/logfmt.h"
#include "detector/config/config.h"

namespace sbd {
namespace {

constexpr const char* kTimeHint =
    "expected an RFC 3339 time between 1970 and 2262, like 2026-11-30T06:00:00Z";

bool IsDeclarationName(const std::string& s) {
  return !s.empty() && s.size() <= 200 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// Why `value` is not one line of printable UTF-8 text of at most `max_bytes`; "" when it is.
std::string TextProblem(const std::string& value, size_t max_bytes) {
  if (value.size() > max_bytes) return "longer than " + std::to_string(max_bytes) + " bytes";
  for (size_t i = 0; i < value.size();) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    char where[64];
    if (c < 0x20 || c == 0x7F) {
      std::snprintf(where, sizeof where, "control character 0x%02X at byte %zu", c, i);
      return std::string(where) + "; expected one line of text";
    }
    const size_t length = Utf8SequenceLength(value, i);
    if (length == 0) {
      std::snprintf(where, sizeof where, "byte 0x%02X at %zu", c, i);
      return std::string("not valid UTF-8 (") + where + ")";
    }
    i += length;
  }
  return "";
}

// Collects a declaration's errors; yaml-cpp marks are 0-based.
class Checker {
 public:
  Checker(std::string file, std::string path) : file_(std::move(file)), path_(std::move(path)) {}

  void Error(const YAML::Mark& mark, const std::string& key, std::string message) {
    // An unknown key is the document's text: escaped, so that errors stay one valid line.
    const std::string shown = LogfmtEscape(key);
    errors_.push_back({file_, std::max(mark.line, 0) + 1, std::max(mark.column, 0) + 1,
                       key.empty() ? path_ : (path_.empty() ? shown : path_ + "." + shown),
                       std::move(message)});
  }
  std::vector<ConfigError>& errors() { return errors_; }

 private:
  std::string file_;
  std::string path_;
  std::vector<ConfigError> errors_;
};

}  // namespace

const char* DeclarationKindName(DeclarationKind kind) {
  switch (kind) {
    case DeclarationKind::kProvisioning:
      return "provisioning";
    case DeclarationKind::kRebuilding:
      return "rebuilding";
    case DeclarationKind::kCutover:
      return "cutover";
    case DeclarationKind::kDecommissioning:
      return "decommissioning";
  }
  return "provisioning";
}

bool Declaration::CoversCluster(const std::string& cluster_name,
                                const std::string& cluster_scope) const {
  return cluster == cluster_name && member.empty() && (scope.empty() || scope == cluster_scope);
}

bool Declaration::CoversMember(const std::string& cluster_name, const std::string& cluster_scope,
                               const std::string& member_name,
                               const std::string& claimed_scope) const {
  if (cluster != cluster_name) return false;
  if (!member.empty() && member != member_name) return false;
  if (scope.empty()) return true;
  // A member whose Patroni could not be read is taken to be in the cluster's own scope.
  const std::string& effective = claimed_scope.empty() ? cluster_scope : claimed_scope;
  return scope == effective;
}

std::string Declaration::Describe() const {
  std::string out = std::string(DeclarationKindName(kind)) + " of " + cluster;
  if (!scope.empty()) out += " scope " + scope;
  if (!member.empty()) out += " member " + member;
  out += " (" + id + ", by " + (author.empty() ? "unknown" : author) + "): " + reason +
         "; expires " + FormatRfc3339(expires);
  return out;
}

std::optional<WallTime> ParseRfc3339(const std::string& text) {
  int year, month, day, hour, minute, second, consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day, &hour, &minute,
                  &second, &consumed) != 6 ||
      consumed != 19) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  size_t i = 19;
  std::chrono::nanoseconds fraction{0};
  if (i < text.size() && text[i] == '.') {
    long long scale = 100000000, nanos = 0;
    size_t digits = 0;
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (scale > 0) nanos += (text[i] - '0') * scale;
      scale /= 10;
      ++digits;
    }
    if (digits == 0) return std::nullopt;
    fraction = std::chrono::nanoseconds(nanos);
  }
  int offset_seconds = 0;
  if (i < text.size() && (text[i] == 'Z' || text[i] == 'z')) {
    ++i;
  } else if (i + 6 == text.size() && (text[i] == '+' || text[i] == '-') && text[i + 3] == ':') {
    int oh = 0, om = 0;
    if (std::sscanf(text.c_str() + i + 1, "%2d:%2d", &oh, &om) != 2 || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_seconds = (text[i] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != text.size()) return std::nullopt;
  struct tm tm {};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const time_t utc = timegm(&tm);
  // timegm normalizes 2026-02-31 into March: such a date is not a real one.
  struct tm back {};
  gmtime_r(&utc, &back);
  if (back.tm_mday != day) return std::nullopt;
  // Outside what WallTime (int64 nanoseconds) holds, from_time_t would overflow.
  constexpr long long kLastSecond =
      std::chrono::duration_cast<std::chrono::seconds>(WallTime::duration::max()).count() - 1;
  const long long seconds = static_cast<long long>(utc) - offset_seconds;
  if (year < 1970 || seconds < 0 || seconds > kLastSecond) return std::nullopt;
  return std::chrono::system_clock::from_time_t(utc - offset_seconds) +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(fraction);
}

WallTime AddSaturating(WallTime t, std::chrono::milliseconds d) {
  using std::chrono::milliseconds;
  // In milliseconds nothing here can overflow; one spare millisecond absorbs truncation.
  const auto max_ms = std::chrono::duration_cast<milliseconds>(WallTime::duration::max()).count();
  const auto min_ms = std::chrono::duration_cast<milliseconds>(WallTime::duration::min()).count();
  const auto since_ms = std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
  if (d.count() >= 0 && d.count() >= max_ms - since_ms - 1) return WallTime::max();
  if (d.count() < 0 && d.count() <= min_ms - since_ms + 1) return WallTime::min();
  return t + std::chrono::duration_cast<WallTime::duration>(d);
}

std::string FormatRfc3339(WallTime t) {
  const time_t seconds = std::chrono::system_clock::to_time_t(t);
  struct tm tm {};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

namespace {

// One declaration mapping, read field by field; every problem is collected.
class DeclarationParser {
 public:
  DeclarationParser(const YAML::Node& node, const std::string& file, const std::string& path,
                    const DeclarationRules& rules)
      : node_(node), rules_(rules), check_(file, path) {}

  std::variant<Declaration, std::vector<ConfigError>> Parse() {
    if (!node_.IsMap()) {
      check_.Error(node_.Mark(), "", "expected a mapping with kind, cluster, reason and expires");
      return std::move(check_.errors());
    }
    ReadKeys();
    Declaration d;
    ReadKind(d);
    d.cluster = Name("cluster", true);
    d.scope = Name("scope", false);
    d.member = Name("member", false);
    d.reason = Text("reason", true, kMaxReasonBytes).value_or("");
    ReadAuthor(d);
    d.id = rules_.allow_identity ? Name("id", true) : "";
    d.source = rules_.allow_identity ? Text("source", false, 16).value_or("api") : "";
    d.origin = rules_.allow_identity ? Text("origin", false, 4096).value_or("api") : "";
    d.created = rules_.now;
    if (rules_.allow_identity) {
      if (auto created = Text("created", true, 64)) {
        if (auto t = ParseRfc3339(*created)) {
          d.created = *t;
        } else {
          check_.Error(Mark("created"), "created", kTimeHint);
        }
      }
    }
    ReadExpiry(d);
    if (!check_.errors().empty()) return std::move(check_.errors());
    return d;
  }

 private:
  void ReadKeys() {
    std::set<std::string> allowed = {"kind",   "cluster", "scope",  "member",
                                     "reason", "author",  "expires"};
    if (rules_.allow_duration) allowed.insert("duration");
    if (rules_.allow_identity) allowed.insert({"id", "created", "source", "origin"});
    for (const auto& kv : node_) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (!allowed.count(key)) {
        check_.Error(kv.first.Mark(), key, "unknown key");
      } else if (fields_.count(key)) {
        check_.Error(kv.first.Mark(), key, "duplicate key");
      } else {
        fields_[key] = kv.second;
        key_marks_[key] = kv.first.Mark();
      }
    }
  }

  // A null value's mark points past it, so errors about values go to the value, or the key.
  YAML::Mark Mark(const std::string& key) {
    return fields_[key].IsNull() ? key_marks_[key] : fields_[key].Mark();
  }

  // A non-empty line of printable UTF-8 text of at most `max_bytes`.
  std::optional<std::string> Text(const std::string& key, bool required, size_t max_bytes) {
    if (!fields_.count(key)) {
      if (required) check_.Error(node_.Mark(), key, "required");
      return std::nullopt;
    }
    if (!fields_[key].IsScalar() || fields_[key].Scalar().empty()) {
      check_.Error(Mark(key), key, "expected a non-empty string");
      return std::nullopt;
    }
    const std::string problem = TextProblem(fields_[key].Scalar(), max_bytes);
    if (!problem.empty()) {
      check_.Error(Mark(key), key, problem);
      return std::nullopt;
    }
    return fields_[key].Scalar();
  }

  std::string Name(const std::string& key, bool required) {
    std::optional<std::string> value = Text(key, required, 200);
    if (value && !IsDeclarationName(*value)) {
      check_.Error(Mark(key), key, "expected a name of letters, digits, '_', '.' and '-'");
      return std::string();
    }
    return value.value_or("");
  }

  void ReadKind(Declaration& d) {
    auto kind = Text("kind", true, 64);
    if (!kind) return;
    for (auto k : {DeclarationKind::kProvisioning, DeclarationKind::kRebuilding,
                   DeclarationKind::kCutover, DeclarationKind::kDecommissioning}) {
      if (*kind == DeclarationKindName(k)) {
        d.kind = k;
        return;
      }
    }
    check_.Error(Mark("kind"), "kind",
                 "expected provisioning, rebuilding, cutover or decommissioning");
  }

  void ReadAuthor(Declaration& d) {
    // The HTTP API requires an author; the authenticated user, when there is one, is it.
    d.author =
        Text("author", rules_.allow_duration && !rules_.author, kMaxAuthorBytes).value_or("");
    if (!rules_.author) return;
    const std::string problem = rules_.author->empty()
                                    ? std::string("the authenticated user name is empty")
                                    : TextProblem(*rules_.author, kMaxAuthorBytes);
    if (!problem.empty()) {
      check_.Error(node_.Mark(), "author", "authenticated user: " + problem);
    }
    d.author = *rules_.author;
  }

  // `expires`, or (API) `duration`: no later than max_duration after the start, which for the
  // state file is its `created` or now, whichever is earlier (a clock never extends one).
  void ReadExpiry(Declaration& d) {
    const bool has_expires = fields_.count("expires") > 0;
    const bool has_duration = fields_.count("duration") > 0;
    const WallTime start = std::min(d.created, rules_.now);
    std::optional<WallTime> expires;
    std::string key = "expires";
    if (has_expires && has_duration) {
      check_.Error(key_marks_["duration"], "duration", "give expires or duration, not both");
    } else if (has_duration) {
      key = "duration";
      if (auto value = Text("duration", true, 64)) {
        const auto duration = ParseDuration(*value);
        if (!duration) {
          check_.Error(Mark(key), key, "expected a duration like 30m or 6h");
        } else if (*duration > rules_.max_duration) {
          check_.Error(Mark(key), key, TooLong());
        } else {
          expires = AddSaturating(d.created, *duration);
        }
      }
    } else if (auto value = Text("expires", true, 64)) {
      if (auto t = ParseRfc3339(*value)) {
        expires = *t;
      } else {
        check_.Error(Mark(key), key, kTimeHint);
      }
    } else if (!has_expires && rules_.allow_duration) {
      // Text() said "expires: required"; say the alternative too.
      check_.errors().back().message = "required (or duration)";
    }
    if (!expires) return;
    d.expires = *expires;
    if (*expires > AddSaturating(start, rules_.max_duration)) {
      check_.Error(Mark(key), key, TooLong());
    } else if (!rules_.allow_expired && *expires <= rules_.now) {
      check_.Error(Mark(key), key, "already expired (" + FormatRfc3339(*expires) + ")");
    }
  }

  std::string TooLong() const {
    return "more than the maximum " + FormatDuration(rules_.max_duration) +
           " ahead; a declaration must expire (suppressions.max_duration)";
  }

  const YAML::Node& node_;
  const DeclarationRules& rules_;
  Checker check_;
  std::map<std::string, YAML::Node> fields_;
  std::map<std::string, YAML::Mark> key_marks_;
};

}  // namespace

std::variant<Declaration, std::vector<ConfigError>> ParseDeclaration(
    const YAML::Node& node, const std::string& file, const std::string& path,
    const DeclarationRules& rules) {
  return DeclarationParser(node, file, path, rules).Parse();
}

std::variant<Declaration, std::vector<ConfigError>> ParseDeclarationText(
    const std::string& text, const std::string& file, const DeclarationRules& rules) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return std::vector<ConfigError>{
        {file, std::max(e.mark.line, 0) + 1, std::max(e.mark.column, 0) + 1, "", e.msg}};
  }
  return ParseDeclaration(node, file, "", rules);
}

}  // namespace sbd
