#include "detector/config/config_reader.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <memory>
#include <variant>

namespace sbd {
namespace {

constexpr const char* kDurationHint = "expected a duration like 500ms, 30s or 1m";
constexpr const char* kNameHint = "expected a name of letters, digits, '_', '.' and '-'";
constexpr const char* kUrlHint = "expected an http:// or https:// URL";

struct Unit {
  const char* suffix;
  Millis::rep ms;
};
// Largest first: ParseDuration requires this order and FormatDuration emits it.
constexpr Unit kUnits[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};

using namespace cfg;

const std::set<std::string>& LibpqKeywords() {
  static const std::set<std::string> keywords = [] {
    std::set<std::string> out;
    // Parsing an empty string lists every option without consulting the environment.
    PQconninfoOption* options = PQconninfoParse("", nullptr);
    for (PQconninfoOption* o = options; o && o->keyword; ++o) out.insert(o->keyword);
    PQconninfoFree(options);
    return out;
  }();
  return keywords;
}

bool IsSafeFragment(const std::string& s) {
  return LibpqKeywords().count(s) > 0 ||
         (s.size() == 1 && !IsLetter(s[0]) && !IsDigit(s[0]) && s[0] != '"');
}

std::string TrimNewlines(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// Only a password keyword or a URI's user:password@ can put a secret in a DSN.
bool MayHoldSecret(const std::string& dsn) {
  std::string lower = dsn;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return lower.find("password") != std::string::npos || dsn.find('@') != std::string::npos;
}

// libpq quotes pieces of the DSN in its messages (sometimes the whole URI), and those may hold
// a password. A quoted piece is taken as the longest run that occurs in the DSN, so a quote
// inside a password cannot end it early; only keywords and single punctuation marks survive.
std::string RedactLibpqMessage(const std::string& raw, const std::string& dsn) {
  const std::string message = TrimNewlines(raw);
  std::string out;
  size_t pos = 0;
  for (size_t open; (open = message.find('"', pos)) != std::string::npos;) {
    size_t close = std::string::npos;
    for (size_t q = message.find('"', open + 1); q != std::string::npos;
         q = message.find('"', q + 1)) {
      const std::string piece = message.substr(open + 1, q - open - 1);
      if (dsn.find(piece) != std::string::npos) {
        close = q;
      } else if (close == std::string::npos && IsSafeFragment(piece)) {
        close = q;
        break;
      }
    }
    if (close == std::string::npos) return out + message.substr(pos, open - pos) + "\"...\"";
    const std::string piece = message.substr(open + 1, close - open - 1);
    out += message.substr(pos, open - pos) + '"' + (IsSafeFragment(piece) ? piece : "...") + '"';
    pos = close + 1;
  }
  return out + message.substr(pos);
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out(1);
  for (char c : text) {
    if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// libpq accepts comma-separated host and port lists; show each host with its port.
std::string BuildAddress(const std::string& hosts_text, const std::string& ports_text) {
  const std::vector<std::string> hosts = SplitCommas(hosts_text);
  const std::vector<std::string> ports = SplitCommas(ports_text);
  std::string out;
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::string host = hosts[i].empty() ? "localhost" : hosts[i];
    std::string port = ports.size() == hosts.size() ? ports[i] : ports[0];
    if (host[0] != '/' && host.find(':') != std::string::npos) host = "[" + host + "]";
    out += (i == 0 ? "" : ",") + host + ":" + (port.empty() ? "5432" : port);
  }
  return out;
}

std::variant<ParsedDsn, std::string> ParseDsn(const std::string& text) {
  char* raw_error = nullptr;
  std::unique_ptr<PQconninfoOption, void (*)(PQconninfoOption*)> options(
      PQconninfoParse(text.c_str(), &raw_error), &PQconninfoFree);
  if (!options) {
    const std::string error = raw_error ? raw_error : "out of memory";
    PQfreemem(raw_error);
    return MayHoldSecret(text) ? RedactLibpqMessage(error, text) : TrimNewlines(error);
  }
  ParsedDsn parsed;
  std::map<std::string, std::string> given;
  for (const PQconninfoOption* o = options.get(); o->keyword; ++o) {
    if (!o->val || !*o->val) continue;
    const std::string keyword = o->keyword;
    parsed.keywords.insert(keyword);
    if (keyword == "password") {
      parsed.password = o->val;
      continue;
    }
    given[keyword] = o->val;
    parsed.dsn += (parsed.dsn.empty() ? "" : " ") + keyword + "=" + QuoteConninfoValue(o->val);
  }
  const std::string host = given.count("host") ? given["host"] : given["hostaddr"];
  parsed.address = BuildAddress(host, given["port"]);
  return parsed;
}
}  // namespace

namespace cfg {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Accepts zero so that callers can say "below the minimum" rather than "malformed".
std::optional<Millis> ParseDurationOrZero(const std::string& text) {
  constexpr Millis::rep kMax = std::numeric_limits<Millis::rep>::max();
  Millis::rep total = 0;
  const Unit* next_unit = std::begin(kUnits);
  size_t i = 0;
  while (i < text.size()) {
    size_t digits_end = i;
    while (digits_end < text.size() && IsDigit(text[digits_end])) ++digits_end;
    size_t unit_end = digits_end;
    while (unit_end < text.size() && IsLetter(text[unit_end])) ++unit_end;
    if (digits_end == i || unit_end == digits_end) return std::nullopt;
    const std::string suffix = text.substr(digits_end, unit_end - digits_end);
    // Like Prometheus: units strictly decreasing, so "1m30s" is valid and "30s1m" is not.
    const Unit* unit = std::find_if(next_unit, std::end(kUnits),
                                    [&](const Unit& u) { return suffix == u.suffix; });
    if (unit == std::end(kUnits)) return std::nullopt;
    next_unit = unit + 1;
    Millis::rep value = 0;
    for (size_t j = i; j < digits_end; ++j) {
      const int digit = text[j] - '0';
      if (value > (kMax - digit) / 10) return std::nullopt;
      value = value * 10 + digit;
    }
    if (value > (kMax - total) / unit->ms) return std::nullopt;
    total += value * unit->ms;
    i = unit_end;
  }
  if (text.empty()) return std::nullopt;
  return Millis(total);
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

bool IsName(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return IsLetter(c) || IsDigit(c) || c == '_' || c == '.' || c == '-';
  });
}

bool IsEnvName(const std::string& s) {
  return !s.empty() && !IsDigit(s[0]) && std::all_of(s.begin(), s.end(), [](char c) {
    return IsLetter(c) || IsDigit(c) || c == '_';
  });
}

// Prometheus' label name syntax, [a-zA-Z_][a-zA-Z0-9_]*: the same rule as environment names.
bool IsLabelName(const std::string& s) { return IsEnvName(s); }

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// http(s)://host[:port][/path]: a scheme the HTTP clients speak, a host, and no whitespace.
bool IsHttpUrl(const std::string& s) {
  for (const std::string scheme : {"http://", "https://"}) {
    if (!StartsWith(s, scheme)) continue;
    const std::string rest = s.substr(scheme.size());
    return !rest.empty() && rest[0] != '/' && std::none_of(rest.begin(), rest.end(), [](char c) {
      return std::isspace(static_cast<unsigned char>(c)) ||
             std::iscntrl(static_cast<unsigned char>(c));
    });
  }
  return false;
}

// A Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or, without `metric`, a label name
// ([a-zA-Z_][a-zA-Z0-9_]*).
bool IsPrometheusName(const std::string& s, bool metric) {
  if (s.empty() || IsDigit(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return IsLetter(c) || IsDigit(c) || c == '_' || (metric && c == ':');
  });
}

// Base URLs and the DCS namespace get paths appended with a '/' of their own.
std::string TrimTrailingSlashes(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// "a", "a and b", "a, b and c".
std::string JoinWords(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " and " : ", ";
    out += words[i];
  }
  return out;
}

}  // namespace cfg

using namespace cfg;

void ConfigReader::AddError(const YAML::Mark& mark, std::string key, std::string message) {
  // yaml-cpp marks are 0-based, and -1 for a node without a position (an empty document).
  errors_.push_back({file_, std::max(mark.line, 0) + 1, std::max(mark.column, 0) + 1,
                     std::move(key), std::move(message)});
}

std::optional<ConfigReader::Fields> ConfigReader::ReadMapping(
    const YAML::Node& node, const std::string& path, const std::vector<std::string>& allowed) {
  if (!node.IsMap()) {
    AddError(node.Mark(), path, "expected a mapping");
    return std::nullopt;
  }
  Fields fields;
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    const auto first = fields.find(key);
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      AddError(kv.first.Mark(), Join(path, key), "unknown key");
    } else if (first != fields.end()) {
      AddError(kv.first.Mark(), Join(path, key),
               "duplicate key (first at line " + std::to_string(first->second.key.Mark().line + 1) +
                   ")");
    } else {
      fields.emplace(key, Entry{kv.first, kv.second});
    }
  }
  return fields;
}

// A nested mapping under a key; when the value is null the error goes to the key.
std::optional<ConfigReader::Fields> ConfigReader::ReadMapping(
    const Entry& entry, const std::string& path, const std::vector<std::string>& allowed) {
  if (!entry.value.IsMap()) {
    AddError(entry.Mark(), path, "expected a mapping");
    return std::nullopt;
  }
  return ReadMapping(entry.value, path, allowed);
}

const ConfigReader::Entry* ConfigReader::Required(const Fields& fields, const YAML::Node& parent,
                                                  const std::string& path, const std::string& key) {
  const auto it = fields.find(key);
  if (it != fields.end()) return &it->second;
  AddError(parent.Mark(), Join(path, key), "required");
  return nullptr;
}

const ConfigReader::Entry* ConfigReader::Optional(const Fields& fields, const std::string& key) {
  const auto it = fields.find(key);
  return it == fields.end() ? nullptr : &it->second;
}

std::optional<std::string> ConfigReader::String(const Entry& entry, const std::string& path) {
  if (entry.value.IsScalar()) return entry.value.Scalar();
  AddError(entry.Mark(), path, "expected a string");
  return std::nullopt;
}

// YAML 1.2 core booleans only, so that "yes", "on" or "y" cannot slip through.
std::optional<bool> ConfigReader::Bool(const Entry& entry, const std::string& path) {
  const std::string text = entry.value.IsScalar() ? entry.value.Scalar() : "";
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  AddError(entry.Mark(), path, "expected true or false");
  return std::nullopt;
}

std::optional<std::string> ConfigReader::ValidName(const Entry& entry, const std::string& path) {
  std::optional<std::string> name = String(entry, path);
  if (name && !IsName(*name)) {
    AddError(entry.Mark(), path, kNameHint);
    return std::nullopt;
  }
  return name;
}

std::optional<std::string> ConfigReader::Name(const Entry& entry, const std::string& path,
                                              SeenNames& seen, const char* kind) {
  const std::optional<std::string> name = ValidName(entry, path);
  if (!name) return std::nullopt;
  const int line = entry.Mark().line + 1;
  const auto [first, inserted] = seen.emplace(*name, line);
  if (!inserted) {
    AddError(entry.Mark(), path,
             std::string("duplicate ") + kind + " name \"" + *name + "\" (first at line " +
                 std::to_string(first->second) + ")");
  }
  return name;
}

// An http:// or https:// URL; with `trim`, stored without trailing '/' so that paths can be
// appended to it.
std::optional<std::string> ConfigReader::HttpUrl(const Entry& entry, const std::string& path,
                                                 bool trim) {
  const std::optional<std::string> url = String(entry, path);
  if (!url) return std::nullopt;
  if (!IsHttpUrl(*url)) {
    AddError(entry.Mark(), path, kUrlHint);
    return std::nullopt;
  }
  return trim ? TrimTrailingSlashes(*url) : *url;
}

bool ConfigReader::Sequence(const Entry& entry, const std::string& path) {
  if (entry.value.IsSequence()) return true;
  AddError(entry.Mark(), path, "expected a sequence");
  return false;
}

bool ConfigReader::NonEmptySequence(const Entry& entry, const std::string& path, const char* item) {
  if (!Sequence(entry, path)) return false;
  if (entry.value.size() == 0) {
    AddError(entry.Mark(), path, std::string("must list at least one ") + item);
    return false;
  }
  return true;
}

ConfigReader::Timing ConfigReader::Duration(const Fields& fields, const std::string& path,
                                            const std::string& key, Millis minimum) {
  const Entry* entry = Optional(fields, key);
  if (!entry) return {};
  const std::optional<Millis> given =
      entry->value.IsScalar() ? ParseDurationOrZero(entry->value.Scalar()) : std::nullopt;
  std::string error;
  if (!given) {
    error = kDurationHint;
  } else if (*given < minimum) {
    error = key + " " + FormatDuration(*given) + " is below the minimum " + FormatDuration(minimum);
  }
  if (!error.empty()) AddError(entry->Mark(), Join(path, key), error);
  return {error.empty(), given, entry->Mark()};
}

// A whole number in [minimum, maximum].
std::optional<int> ConfigReader::Count(const Entry& entry, const std::string& path, int minimum,
                                       int maximum) {
  const std::string text = entry.value.IsScalar() ? entry.value.Scalar() : "";
  if (text.empty() || text.size() > 9 || !std::all_of(text.begin(), text.end(), IsDigit) ||
      std::stoi(text) < minimum || std::stoi(text) > maximum) {
    AddError(entry.Mark(), path,
             "expected a whole number from " + std::to_string(minimum) + " to " +
                 std::to_string(maximum));
    return std::nullopt;
  }
  return std::stoi(text);
}

// password_file and password_env: a non-empty path and a valid variable name respectively.
std::optional<std::string> ConfigReader::PasswordSource(const Fields& fields,
                                                        const std::string& path,
                                                        const std::string& key) {
  const Entry* entry = Optional(fields, key);
  if (!entry) return std::nullopt;
  std::optional<std::string> value = String(*entry, Join(path, key));
  const bool env = key.size() >= 12 && key.compare(key.size() - 12, 12, "password_env") == 0;
  if (value && (env ? !IsEnvName(*value) : value->empty())) {
    AddError(entry->Mark(), Join(path, key),
             env ? "expected an environment variable name" : "expected a file path");
    return std::nullopt;
  }
  return value;
}

// Both password sources of a member or a discovery block (`prefix` "sentinel_" for the
// sentinels' own); at most one may be set.
void ConfigReader::PasswordSources(const Fields& fields, const std::string& path,
                                   std::optional<std::string>& file,
                                   std::optional<std::string>& env, const std::string& prefix) {
  file = PasswordSource(fields, path, prefix + "password_file");
  env = PasswordSource(fields, path, prefix + "password_env");
  if (file && env) {
    AddError(fields.at(prefix + "password_env").Mark(), Join(path, prefix + "password_env"),
             "only one of " + prefix + "password_file and " + prefix + "password_env may be set");
  }
}

// A libpq connection string, checked by libpq's own parser.
std::optional<ParsedDsn> ConfigReader::Dsn(const Entry& entry, const std::string& path) {
  const std::optional<std::string> text = String(entry, path);
  if (!text) return std::nullopt;
  std::variant<ParsedDsn, std::string> parsed = ParseDsn(*text);
  if (const std::string* error = std::get_if<std::string>(&parsed)) {
    AddError(entry.Mark(), path, *error);
    return std::nullopt;
  }
  return std::move(std::get<ParsedDsn>(parsed));
}

// libpq settings for members whose host and port come from elsewhere (`from` says where):
// the dsn may not set them, and the password must come from a file or the environment.
std::string ConfigReader::HostlessDsn(const Entry* dsn, const std::string& dsn_path,
                                      const char* from) {
  std::optional<ParsedDsn> parsed = dsn ? Dsn(*dsn, dsn_path) : std::nullopt;
  if (!parsed) return "";
  std::vector<std::string> addressing;
  for (const char* keyword : {"host", "hostaddr", "port"}) {
    if (parsed->keywords.count(keyword)) addressing.push_back(keyword);
  }
  if (!addressing.empty()) {
    AddError(dsn->Mark(), dsn_path, "must not set " + JoinWords(addressing) + ": " + from);
  }
  if (parsed->password) {
    AddError(dsn->Mark(), dsn_path, "must not hold a password: use password_file or password_env");
  }
  return std::move(parsed->dsn);
}

std::optional<Millis> ParseDuration(const std::string& text) {
  std::optional<Millis> d = ParseDurationOrZero(text);
  if (d && d->count() == 0) return std::nullopt;
  return d;
}

std::string FormatDuration(Millis d) {
  if (d.count() <= 0) return d.count() == 0 ? "0s" : "-" + FormatDuration(-d);
  std::string out;
  Millis::rep rest = d.count();
  for (const Unit& unit : kUnits) {
    if (rest >= unit.ms) out += std::to_string(rest / unit.ms) + unit.suffix;
    rest %= unit.ms;
  }
  return out;
}

}  // namespace sbd
