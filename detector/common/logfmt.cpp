#include "detector/common/logfmt.h"

#include <algorithm>
#include <cstdio>

namespace sbd {

size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = i + 2; k < i + length; ++k) {
    if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
  }
  return length;
}

std::string LogfmtEscape(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size();) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    const size_t length = Utf8SequenceLength(value, i);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F || length == 0) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    } else {
      out.append(value.substr(i, length));
      i += length;
      continue;
    }
    ++i;
  }
  return out;
}

std::string ShownToken(std::string_view token) {
  if (token.size() <= kShownTokenBytes) return LogfmtEscape(token);
  // Cut on a character boundary, so the escape does not turn a split character into bytes.
  size_t cut = 0;
  while (cut < kShownTokenBytes) {
    const size_t length = Utf8SequenceLength(token, cut);
    if (cut + std::max<size_t>(length, 1) > kShownTokenBytes) break;
    cut += std::max<size_t>(length, 1);
  }
  return LogfmtEscape(token.substr(0, cut)) + "...(" + std::to_string(token.size()) + " bytes)";
}

}  // namespace sbd
