// A value inside a tokenizer.json (or tokenizer_config.json) with where it sits, so that every
// error names the file and the key path: "[tokenizer PATH] model.merges[12]: ...".
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace mixprec::data::hf {

class JsonField {
 public:
  JsonField(const nlohmann::json& value, std::string file, std::string key)
      : value_(&value), file_(std::move(file)), key_(std::move(key)) {}

  const nlohmann::json& json() const { return *value_; }
  const std::string& file() const { return file_; }
  const std::string& key() const { return key_; }
  [[noreturn]] void fail(const std::string& what) const;

  // A required member of an object.
  JsonField operator[](std::string_view name) const;
  // An optional member; a JSON null counts as absent.
  std::optional<JsonField> find(std::string_view name) const;
  std::size_t size() const;  // of an array
  JsonField at(std::size_t i) const;

  std::string string() const;
  bool boolean() const;
  int64_t integer(int64_t min, int64_t max) const;
  double number() const;
  bool is_string() const { return value_->is_string(); }
  bool is_array() const { return value_->is_array(); }
  bool is_object() const { return value_->is_object(); }

  // Optional members with a default.
  std::string string_or(std::string_view name, const std::string& fallback) const;
  bool boolean_or(std::string_view name, bool fallback) const;

 private:
  const nlohmann::json* value_;
  std::string file_;
  std::string key_;
};

// Parses a whole file's text (nesting bounded); errors name `file`.
nlohmann::json parse_json_file(const std::string& text, const std::string& file);

}  // namespace mixprec::data::hf
