#include "detector/common/network_text.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "detector/common/logfmt.h"

namespace sbd {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kCutMarker = "\xE2\x80\xA6";    // U+2026, "..."

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7F; }

// `text` with invalid bytes (and, with `controls`, control characters) as U+FFFD, cut to at
// most `max_bytes` with the marker at the end when it does not fit.
std::string Replaced(std::string_view text, size_t max_bytes, bool controls) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  bool cut = false;
  for (size_t i = 0; i < text.size();) {
    const size_t length = Utf8SequenceLength(text, i);
    if (length == 0 || (controls && IsControl(static_cast<unsigned char>(text[i])))) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
    if (out.size() > max_bytes) {
      cut = true;
      break;
    }
  }
  if (!cut) return out;
  size_t end = max_bytes - kCutMarker.size();
  while (end > 0 && (static_cast<unsigned char>(out[end]) & 0xC0) == 0x80) --end;
  out.resize(end);
  out += kCutMarker;
  return out;
}

// FNV-1a: stable from run to run, so that a renamed member keeps its series across restarts.
std::string ShortHash(std::string_view raw) {
  std::uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : raw) hash = (hash ^ c) * 1099511628211ull;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(hash ^ (hash >> 32)));
  return hex;
}

}  // namespace

bool IsValidUtf8(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) return false;
  for (size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t length = Utf8SequenceLength(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

std::string ValidUtf8(std::string_view text, size_t max_bytes) {
  if (IsValidUtf8(text, max_bytes)) return std::string(text);
  return Replaced(text, max_bytes, false);
}

std::string NetworkName(std::string_view raw) {
  bool clean = IsValidUtf8(raw, kMaxNetworkNameBytes);
  for (size_t i = 0; clean && i < raw.size(); ++i) {
    clean = !IsControl(static_cast<unsigned char>(raw[i]));
  }
  if (clean) return std::string(raw);
  const std::string suffix = "~" + ShortHash(raw);
  return Replaced(raw, kMaxNetworkNameBytes - suffix.size(), true) + suffix;
}

std::string RedactedUrl(std::string_view url) {
  // A scheme is letters, digits, '+', '-' and '.' before "://" (which a query may hold too).
  size_t scheme_end = url.find("://");
  if (scheme_end == 0 ||
      (scheme_end != std::string_view::npos &&
       url.substr(0, scheme_end)
               .find_first_not_of(
                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.") !=
           std::string_view::npos)) {
    scheme_end = std::string_view::npos;
  }
  const size_t rest_start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const std::string_view rest = url.substr(rest_start);
  // As the HTTP client reads it: the authority ends at the first '/', '?' or '#'.
  const size_t authority_end = std::min(rest.find_first_of("/?#"), rest.size());
  std::string_view authority = rest.substr(0, authority_end);
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    authority = authority.substr(at + 1);
  }
  std::string_view path = rest.substr(authority_end);
  path = path.substr(0, std::min(path.find_first_of("?#"), path.size()));
  std::string out(url.substr(0, rest_start));
  out.append(authority);
  out.append(path);
  return out;
}

std::string ScrubSecret(std::string text, const std::optional<std::string>& secret) {
  static const std::string kRedacted = "<redacted>";
  if (!secret || secret->empty()) return text;
  for (size_t at = text.find(*secret); at != std::string::npos;
       at = text.find(*secret, at + kRedacted.size())) {
    text.replace(at, secret->size(), kRedacted);
  }
  return text;
}

}  // namespace sbd
