#include "probes/exposition.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>

#include "detector/common/logfmt.h"

namespace sbd {

const std::string* ExpositionSample::Label(const std::string& name) const {
  for (const auto& [key, value] : labels) {
    if (key == name) return &value;
  }
  return nullptr;
}

namespace {

bool IsNameStart(char c, bool colon_ok) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_ok && c == ':');
}
bool IsNameChar(char c, bool colon_ok) {
  return IsNameStart(c, colon_ok) || (c >= '0' && c <= '9');
}
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// A cursor over one line; every Take* returns false (and leaves `error`) on malformed input.
struct LineReader {
  std::string_view line;
  size_t at = 0;
  std::string error;

  bool Done() const { return at >= line.size(); }
  void SkipBlanks() {
    while (!Done() && IsBlank(line[at])) ++at;
  }
  bool Fail(std::string what) {
    error = std::move(what);
    return false;
  }
  bool TakeName(bool colon_ok, std::string* out) {
    if (Done() || !IsNameStart(line[at], colon_ok)) return Fail("expected a name");
    const size_t start = at;
    while (!Done() && IsNameChar(line[at], colon_ok)) ++at;
    out->assign(line.substr(start, at - start));
    return true;
  }
  bool TakeQuoted(std::string* out) {
    if (Done() || line[at] != '"') return Fail("expected '\"' to open a label value");
    for (++at; !Done(); ++at) {
      const char c = line[at];
      if (c == '"') {
        ++at;
        return Utf8Valid(*out) || Fail("a label value is not UTF-8");
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (++at == line.size()) break;
      const char escaped = line[at];
      if (escaped == 'n') {
        out->push_back('\n');
      } else if (escaped == '\\' || escaped == '"') {
        out->push_back(escaped);
      } else {
        return Fail("unknown escape in a label value");
      }
    }
    return Fail("a label value is not closed");
  }
  static bool Utf8Valid(const std::string& text) {
    for (size_t i = 0; i < text.size();) {
      const size_t length = Utf8SequenceLength(text, i);
      if (length == 0) return false;
      i += length;
    }
    return true;
  }
  std::string_view TakeToken() {
    const size_t start = at;
    while (!Done() && !IsBlank(line[at])) ++at;
    return line.substr(start, at - start);
  }
};

std::optional<double> ParseValue(std::string_view token) {
  std::string lower(token);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (lower == "+inf" || lower == "inf") return std::numeric_limits<double>::infinity();
  if (lower == "-inf") return -std::numeric_limits<double>::infinity();
  if (!token.empty() && token[0] == '+') token.remove_prefix(1);
  if (token.empty() || token[0] == '+') return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc() || end != token.data() + token.size()) return std::nullopt;
  // from_chars also reads "nan(...)" and "infinity": only the spellings above are Prometheus's.
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

bool ParseLabels(LineReader& reader, ExpositionSample* sample) {
  ++reader.at;  // '{'
  std::set<std::string> seen;
  while (true) {
    reader.SkipBlanks();
    if (reader.Done()) return reader.Fail("the label set is not closed");
    if (reader.line[reader.at] == '}') break;
    std::string name, value;
    if (!reader.TakeName(false, &name)) return false;
    reader.SkipBlanks();
    if (reader.Done() || reader.line[reader.at] != '=') return reader.Fail("expected '='");
    ++reader.at;
    reader.SkipBlanks();
    if (!reader.TakeQuoted(&value)) return false;
    if (!seen.insert(name).second) return reader.Fail("label \"" + name + "\" appears twice");
    sample->labels.emplace_back(std::move(name), std::move(value));
    reader.SkipBlanks();
    if (!reader.Done() && reader.line[reader.at] == ',') {
      ++reader.at;
    } else if (reader.Done() || reader.line[reader.at] != '}') {
      return reader.Fail("expected ',' or '}' after a label");
    }
  }
  ++reader.at;  // '}'
  return true;
}

bool ParseSample(std::string_view line, ExpositionSample* sample, std::string* error) {
  LineReader reader;
  reader.line = line;
  reader.SkipBlanks();
  bool ok = reader.TakeName(true, &sample->metric);
  reader.SkipBlanks();
  if (ok && !reader.Done() && reader.line[reader.at] == '{') ok = ParseLabels(reader, sample);
  if (ok) {
    reader.SkipBlanks();
    const auto value = ParseValue(reader.TakeToken());
    ok = value.has_value() || reader.Fail("the value is not a number");
    if (ok) sample->value = *value;
  }
  if (ok) {
    reader.SkipBlanks();
    const auto timestamp = reader.TakeToken();
    std::int64_t millis = 0;
    if (!timestamp.empty()) {
      auto [end, ec] =
          std::from_chars(timestamp.data(), timestamp.data() + timestamp.size(), millis);
      ok = (ec == std::errc() && end == timestamp.data() + timestamp.size()) ||
           reader.Fail("the timestamp is not an integer");
    }
  }
  if (ok) {
    reader.SkipBlanks();
    ok = reader.Done() || reader.Fail("unexpected text after the value");
  }
  if (!ok) *error = reader.error;
  return ok;
}

// The series' identity: its labels sorted, each part framed by its length.
std::string SeriesKey(const ExpositionSample& sample) {
  auto labels = sample.labels;
  std::sort(labels.begin(), labels.end());
  std::string key;
  for (const auto& [name, value] : labels) {
    key += std::to_string(name.size()) + ":" + name + std::to_string(value.size()) + ":" + value;
  }
  return key;
}

}  // namespace

std::variant<std::vector<ExpositionSample>, std::string> ParseExposition(
    std::string_view text, const std::string& metric) {
  std::vector<ExpositionSample> samples;
  std::set<std::string> series;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    const std::string where = "line " + std::to_string(line_number) + ": ";
    if (line.size() > kMaxExpositionLineBytes) return where + "longer than the line limit";
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    ExpositionSample sample;
    sample.line = line_number;
    std::string error;
    if (!ParseSample(line, &sample, &error)) return where + error;
    if (sample.metric != metric) continue;
    if (!series.insert(SeriesKey(sample)).second) return where + "the same series twice";
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace sbd
