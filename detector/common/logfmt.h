// Escaping for values written into logfmt log lines (key="value"), so that nothing read from a
// request, a file or a member can end a line, close a quote or forge another key.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sbd {

/// `value` escaped for use between the double quotes of a logfmt field: `"` -> `\"`,
/// `\` -> `\\`, newline -> `\n`, carriage return -> `\r`, tab -> `\t`, other control
/// characters, DEL and bytes that are not valid UTF-8 -> `\xNN`. Valid UTF-8 is kept as is,
/// so the result is always valid UTF-8 (and safe to put into JSON). Pure; thread-safe.
std::string LogfmtEscape(std::string_view value);

/// Length in bytes of the valid UTF-8 sequence starting at `text[i]`, or 0 if none starts
/// there (a stray continuation byte, an overlong form, a surrogate, beyond U+10FFFF, cut off).
size_t Utf8SequenceLength(std::string_view text, size_t i);

/// The longest part of a token shown to people; the rest is cut and said to be.
constexpr size_t kShownTokenBytes = 64;

/// A token for people (status, alerts, logs): control, quote and non-UTF-8 bytes escaped
/// (LogfmtEscape), cut after kShownTokenBytes with "...(N bytes)". Tokens are lock values, not
/// secrets, but anyone who can write the key or a claim chooses them. Pure; thread-safe.
std::string ShownToken(std::string_view token);

}  // namespace sbd
