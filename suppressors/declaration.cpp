#include "suppressors/declaration.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "detector/config.h"

namespace sbd {
namespace {

constexpr size_t kMaxReasonLength = 500;
constexpr const char* kTimeHint = "expected an RFC 3339 time like 2026-11-30T06:00:00Z";

bool IsDeclarationName(const std::string& s) {
  return !s.empty() && s.size() <= 200 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// Collects a declaration's errors; yaml-cpp marks are 0-based.
class Checker {
 public:
  Checker(std::string file, std::string path) : file_(std::move(file)), path_(std::move(path)) {}

  void Error(const YAML::Mark& mark, const std::string& key, std::string message) {
    errors_.push_back({file_, std::max(mark.line, 0) + 1, std::max(mark.column, 0) + 1,
                       key.empty() ? path_ : (path_.empty() ? key : path_ + "." + key),
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
  return std::chrono::system_clock::from_time_t(utc - offset_seconds) +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(fraction);
}

std::string FormatRfc3339(WallTime t) {
  const time_t seconds = std::chrono::system_clock::to_time_t(t);
  struct tm tm {};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::variant<Declaration, std::vector<ConfigError>> ParseDeclaration(
    const YAML::Node& node, const std::string& file, const std::string& path,
    const DeclarationRules& rules) {
  Checker check(file, path);
  Declaration d;
  if (!node.IsMap()) {
    check.Error(node.Mark(), "", "expected a mapping with kind, cluster, reason and expires");
    return std::move(check.errors());
  }
  std::set<std::string> allowed = {"kind",   "cluster", "scope",  "member",
                                   "reason", "author",  "expires"};
  if (rules.allow_duration) allowed.insert("duration");
  if (rules.allow_identity) allowed.insert({"id", "created", "source", "origin"});
  std::map<std::string, YAML::Node> fields;
  std::map<std::string, YAML::Mark> key_marks;
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    if (!allowed.count(key)) {
      check.Error(kv.first.Mark(), key, "unknown key");
    } else if (fields.count(key)) {
      check.Error(kv.first.Mark(), key, "duplicate key");
    } else {
      fields[key] = kv.second;
      key_marks[key] = kv.first.Mark();
    }
  }
  // A null value's mark points past it, so errors about values go to the value, or the key.
  auto mark = [&](const std::string& key) {
    return fields[key].IsNull() ? key_marks[key] : fields[key].Mark();
  };
  auto text = [&](const std::string& key, bool required) -> std::optional<std::string> {
    if (!fields.count(key)) {
      if (required) check.Error(node.Mark(), key, "required");
      return std::nullopt;
    }
    if (!fields[key].IsScalar() || fields[key].Scalar().empty()) {
      check.Error(mark(key), key, "expected a non-empty string");
      return std::nullopt;
    }
    return fields[key].Scalar();
  };
  auto name = [&](const std::string& key, bool required) {
    std::optional<std::string> value = text(key, required);
    if (value && !IsDeclarationName(*value)) {
      check.Error(mark(key), key, "expected a name of letters, digits, '_', '.' and '-'");
      return std::string();
    }
    return value.value_or("");
  };

  if (auto kind = text("kind", true)) {
    bool known = false;
    for (auto k : {DeclarationKind::kProvisioning, DeclarationKind::kRebuilding,
                   DeclarationKind::kCutover, DeclarationKind::kDecommissioning}) {
      if (*kind == DeclarationKindName(k)) {
        d.kind = k;
        known = true;
      }
    }
    if (!known) {
      check.Error(mark("kind"), "kind",
                  "expected provisioning, rebuilding, cutover or decommissioning");
    }
  }
  d.cluster = name("cluster", true);
  d.scope = name("scope", false);
  d.member = name("member", false);
  d.reason = text("reason", true).value_or("");
  if (d.reason.size() > kMaxReasonLength) {
    check.Error(mark("reason"), "reason",
                "longer than " + std::to_string(kMaxReasonLength) + " characters");
  }
  d.author = text("author", rules.allow_duration).value_or("");
  d.id = rules.allow_identity ? name("id", true) : "";
  d.source = rules.allow_identity ? text("source", false).value_or("api") : "";
  d.origin = rules.allow_identity ? text("origin", false).value_or("api") : "";
  d.created = rules.now;
  if (rules.allow_identity) {
    if (auto created = text("created", true)) {
      if (auto t = ParseRfc3339(*created)) {
        d.created = *t;
      } else {
        check.Error(mark("created"), "created", kTimeHint);
      }
    }
  }

  const bool has_expires = fields.count("expires") > 0;
  const bool has_duration = fields.count("duration") > 0;
  std::optional<WallTime> expires;
  std::string expiry_key = "expires";
  if (has_expires && has_duration) {
    check.Error(key_marks["duration"], "duration", "give expires or duration, not both");
  } else if (has_duration) {
    expiry_key = "duration";
    if (auto value = text("duration", true)) {
      if (auto duration = ParseDuration(*value)) {
        expires = d.created + *duration;
      } else {
        check.Error(mark("duration"), "duration", "expected a duration like 30m or 6h");
      }
    }
  } else if (auto value = text("expires", true)) {
    if (auto t = ParseRfc3339(*value)) {
      expires = *t;
    } else {
      check.Error(mark("expires"), "expires", kTimeHint);
    }
  } else if (!has_expires && rules.allow_duration) {
    // text() said "expires: required"; say the alternative too.
    check.errors().back().message = "required (or duration)";
  }
  if (expires) {
    d.expires = *expires;
    if (*expires > d.created + rules.max_duration) {
      check.Error(mark(expiry_key), expiry_key,
                  "more than the maximum " + FormatDuration(rules.max_duration) +
                      " ahead; a declaration must expire (suppressions.max_duration)");
    } else if (!rules.allow_expired && *expires <= rules.now) {
      check.Error(mark(expiry_key), expiry_key,
                  "already expired (" + FormatRfc3339(*expires) + ")");
    }
  }
  if (!check.errors().empty()) return std::move(check.errors());
  return d;
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
