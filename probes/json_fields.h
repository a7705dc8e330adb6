// Typed reads of JSON answers from the network (Patroni's REST API, etcd's gateway, values
// members write into the DCS). Such an answer may hold anything: every read checks the type
// first, and a wrong type becomes a message saying what was wrong instead of an exception.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace sbd {

/// Reads optional fields of one JSON object, remembering the first problem met. A field that
/// is absent or null leaves its output unchanged; a field of the wrong type leaves it unchanged
/// too and sets error() to "<where>: <key> is not <a type>". Once an error is set, further
/// reads do nothing. Never throws. Holds a reference to the object, which must outlive it;
/// not thread-safe.
class JsonFields {
 public:
  /// `where` names the object in messages ("/patroni", "range: kvs[2]"). Anything but a JSON
  /// object is an error at once: "<where>: not a JSON object".
  JsonFields(const nlohmann::json& object, std::string where);

  /// A JSON string.
  JsonFields& String(const char* key, std::string* out);
  /// A JSON boolean.
  JsonFields& Bool(const char* key, bool* out);
  /// A JSON integer within [min, max]; outside it, error() says "<key> is out of range
  /// <min>..<max>" and `*out` is unchanged (never a wrapped value).
  JsonFields& Int64(const char* key, std::int64_t* out,
                    std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                    std::int64_t max = std::numeric_limits<std::int64_t>::max());
  /// A JSON integer within [min, max], stored as an int.
  JsonFields& Int(const char* key, int* out, int min, int max);
  /// Any JSON number.
  JsonFields& Double(const char* key, std::optional<double>* out);
  /// A 64-bit integer as etcd's gateway writes it: decimal text, or a JSON integer, within
  /// [min, max] as Int64().
  JsonFields& DecimalInt64(const char* key, std::int64_t* out,
                           std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                           std::int64_t max = std::numeric_limits<std::int64_t>::max());
  /// A nested JSON object; `*out` points into the object read, or stays null when absent.
  JsonFields& Object(const char* key, const nlohmann::json** out);
  /// A JSON array; `*out` points into the object read, or stays null when absent.
  JsonFields& Array(const char* key, const nlohmann::json** out);

  /// The first problem met, if any.
  const std::optional<std::string>& error() const { return error_; }
  bool ok() const { return !error_; }

 private:
  // The field to read, or null when absent, null-valued, or after an earlier error.
  const nlohmann::json* Find(const char* key) const;
  void Fail(const char* key, const std::string& what);
  void OutOfRange(const char* key, std::int64_t min, std::int64_t max);

  const nlohmann::json& object_;
  std::string where_;
  std::optional<std::string> error_;
};

/// The highest revision, epoch or lease id accepted from a store: 2^53, the largest integer a
/// JSON reader of /status (a double) still holds exactly, and far above any real store's
/// (etcd's revision grows by one per write). A higher one is a rejected value, never one that
/// wraps in the arithmetic done on it (`revision + 1`).
constexpr std::int64_t kMaxStoreRevision = std::int64_t{1} << 53;
/// The longest lease or TTL accepted from a store, in seconds: a year, far beyond any leader
/// election (Patroni's ttl is 30 s by default); more would overflow once in milliseconds.
constexpr std::int64_t kMaxLeaseSeconds = 366 * 86400;

/// The deepest nesting of arrays and objects accepted in JSON from the network. Every answer
/// the probes read is a few levels deep; a deeper one is hostile, and code that walks a value
/// recursively (dump(), copies, comparisons) would overflow the stack on ~100,000 levels.
constexpr int kMaxJsonDepth = 64;

/// Why `text` may not be handed to a JSON parser: nullopt when its arrays and objects nest at
/// most `max_depth` deep, else "nested deeper than <max_depth> levels". A linear scan that
/// skips strings (with their escapes) and never recurses; it does not otherwise validate.
std::optional<std::string> JsonNestingProblem(std::string_view text, int max_depth = kMaxJsonDepth);

/// JSON text from the network parsed, never throwing and never recursing on its structure:
/// the value, or why not ("nested deeper than 64 levels", "not JSON").
std::variant<nlohmann::json, std::string> ParseUntrustedJson(std::string_view text,
                                                             int max_depth = kMaxJsonDepth);

/// All of `text` as a decimal 64-bit integer (an optional leading '-'); nullopt for anything
/// else, including an empty text, spaces, trailing bytes and values out of range.
std::optional<std::int64_t> ParseDecimalInt64(std::string_view text);

}  // namespace sbd
