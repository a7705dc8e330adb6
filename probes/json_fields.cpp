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
      field->get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
    Fail(key, "out of range");
    return *this;
  }
  const std::int64_t value = field->get<std::int64_t>();
  if (value < min || value > max) {
    Fail(key, "out of range");
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

JsonFields& JsonFields::DecimalInt64(const char* key, std::int64_t* out) {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) return *this;
  if (field->is_number_integer()) return Int64(key, out);
  std::optional<std::int64_t> value;
  if (field->is_string()) value = ParseDecimalInt64(field->get_ref<const std::string&>());
  if (!value) {
    Fail(key, "not a decimal integer");
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
