#include "probes/json_fields.h"

#include <charconv>

namespace sbd {

JsonFields::JsonFields(const nlohmann::json& object, std::string where)
    : object_(object), where_(std::move(where)) {
  if (!object_.is_object()) error_ = where_ + ": not a JSON object";
}

const nlohmann::json* JsonFields::Find(const char* key) const {
  if (error_) return nullptr;
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void JsonFields::Fail(const char* key, const std::string& what) {
  error_ = where_ + ": " + key + " is " + what;
}

void JsonFields::OutOfRange(const char* key, std::int64_t min, std::int64_t max) {
  Fail(key, "out of range " + std::to_string(min) + ".." + std::to_string(max));
}

JsonFields& JsonFields::String(const char* key, std::string* out) {
  if (const nlohmann::json* field = Find(key)) {
    if (!field->is_string()) {
      Fail(key, "not a string");
    } else {
      *out = field->get_ref<const std::string&>();
    }
  }
  return *this;
}

JsonFields& JsonFields::Bool(const char* key, bool* out) {
  if (const nlohmann::json* field = Find(key)) {
    if (!field->is_boolean()) {
      Fail(key, "not a boolean");
    } else {
      *out = field->get<bool>();
    }
  }
  return *this;
}

JsonFields& JsonFields::Int64(const char* key, std::int64_t* out, std::int64_t min,
                              std::int64_t max) {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) return *this;
  if (!field->is_number_integer()) {
    Fail(key, "not an integer");
    return *this;
  }
  // An unsigned value above the int64 range would wrap in get<std::int64_t>().
  if (field->is_number_unsigned() &&
      (max < 0 || field->get<std::uint64_t>() > static_cast<std::uint64_t>(max))) {
    OutOfRange(key, min, max);
    return *this;
  }
  const std::int64_t value = field->get<std::int64_t>();
  if (value < min || value > max) {
    OutOfRange(key, min, max);
    return *this;
  }
  *out = value;
  return *this;
}

JsonFields& JsonFields::Int(const char* key, int* out, int min, int max) {
  std::int64_t value = 0;
  const bool present = Find(key) != nullptr;
  Int64(key, &value, min, max);
  if (present && ok()) *out = static_cast<int>(value);
  return *this;
}

JsonFields& JsonFields::Double(const char* key, std::optional<double>* out) {
  if (const nlohmann::json* field = Find(key)) {
    if (!field->is_number()) {
      Fail(key, "not a number");
    } else {
      *out = field->get<double>();
    }
  }
  return *this;
}

JsonFields& JsonFields::DecimalInt64(const char* key, std::int64_t* out, std::int64_t min,
                                     std::int64_t max) {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) return *this;
  if (field->is_number_integer()) return Int64(key, out, min, max);
  if (!field->is_string()) {
    Fail(key, "not a decimal integer");
    return *this;
  }
  const std::string& text = field->get_ref<const std::string&>();
  const std::optional<std::int64_t> value = ParseDecimalInt64(text);
  // Digits beyond the int64 range are a number out of range, not a malformed one.
  const bool digits = !text.empty() && text.find_first_not_of("-0123456789") == std::string::npos;
  if (!value && !digits) {
    Fail(key, "not a decimal integer");
  } else if (!value || *value < min || *value > max) {
    OutOfRange(key, min, max);
  } else {
    *out = *value;
  }
  return *this;
}

JsonFields& JsonFields::Object(const char* key, const nlohmann::json** out) {
  if (const nlohmann::json* field = Find(key)) {
    if (!field->is_object()) {
      Fail(key, "not an object");
    } else {
      *out = field;
    }
  }
  return *this;
}

JsonFields& JsonFields::Array(const char* key, const nlohmann::json** out) {
  if (const nlohmann::json* field = Find(key)) {
    if (!field->is_array()) {
      Fail(key, "not a list");
    } else {
      *out = field;
    }
  }
  return *this;
}

std::optional<std::string> JsonNestingProblem(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped byte cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return "nested deeper than " + std::to_string(max_depth) + " levels";
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

std::variant<nlohmann::json, std::string> ParseUntrustedJson(std::string_view text, int max_depth) {
  if (auto problem = JsonNestingProblem(text, max_depth)) return *problem;
  nlohmann::json value = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (value.is_discarded()) return std::string("not JSON");
  return value;
}

std::optional<std::int64_t> ParseDecimalInt64(std::string_view text) {
  // from_chars takes no '+', no spaces and no base prefix: exactly the decimal text etcd writes.
  if (text.empty()) return std::nullopt;
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

}  // namespace sbd
