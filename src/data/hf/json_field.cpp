#include "json_field.h"

#include "../../io/text_bounds.h"
#include "mixprec/core/error.h"

namespace mixprec::data::hf {
namespace {

const char* type_name(const nlohmann::json& j) {
  return j.type_name();
}

}  // namespace

void JsonField::fail(const std::string& what) const {
  throw Error("tokenizer " + file_,
              (key_.empty() ? std::string("the top level") : key_) + ": " + what);
}

JsonField JsonField::operator[](std::string_view name) const {
  auto found = find(name);
  if (!found) {
    if (!value_->is_object()) fail(std::string("is ") + type_name(*value_) + ", not an object");
    fail("has no key '" + std::string(name) + "'");
  }
  return *found;
}

std::optional<JsonField> JsonField::find(std::string_view name) const {
  if (!value_->is_object()) fail(std::string("is ") + type_name(*value_) + ", not an object");
  const auto it = value_->find(name);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonField(*it, file_, key_.empty() ? std::string(name) : key_ + "." + std::string(name));
}

std::size_t JsonField::size() const {
  if (!value_->is_array()) fail(std::string("is ") + type_name(*value_) + ", not an array");
  return value_->size();
}

JsonField JsonField::at(std::size_t i) const {
  if (i >= size()) fail("has no element " + std::to_string(i));
  return JsonField((*value_)[i], file_, key_ + "[" + std::to_string(i) + "]");
}

std::string JsonField::string() const {
  if (!value_->is_string()) fail(std::string("is ") + type_name(*value_) + ", not a string");
  return value_->get<std::string>();
}

bool JsonField::boolean() const {
  if (!value_->is_boolean()) fail(std::string("is ") + type_name(*value_) + ", not true or false");
  return value_->get<bool>();
}

int64_t JsonField::integer(int64_t min, int64_t max) const {
  if (value_->is_number_unsigned()) {
    const uint64_t v = value_->get<uint64_t>();
    if (v > static_cast<uint64_t>(max))
      fail(std::to_string(v) + " is above " + std::to_string(max));
    return static_cast<int64_t>(v);
  }
  if (!value_->is_number_integer())
    fail(std::string("is ") + type_name(*value_) + ", not an integer");
  const int64_t v = value_->get<int64_t>();
  if (v < min || v > max)
    fail(std::to_string(v) + " is outside [" + std::to_string(min) + ", " + std::to_string(max) +
         "]");
  return v;
}

double JsonField::number() const {
  if (!value_->is_number()) fail(std::string("is ") + type_name(*value_) + ", not a number");
  return value_->get<double>();
}

std::string JsonField::string_or(std::string_view name, const std::string& fallback) const {
  const auto f = find(name);
  return f ? f->string() : fallback;
}

bool JsonField::boolean_or(std::string_view name, bool fallback) const {
  const auto f = find(name);
  return f ? f->boolean() : fallback;
}

nlohmann::json parse_json_file(const std::string& text, const std::string& file) {
  MIXPREC_CHECK(io::json_nesting_depth(text) <= io::kMaxNesting, "tokenizer " + file,
                "nests deeper than " + std::to_string(io::kMaxNesting) + " levels");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  MIXPREC_CHECK(!j.is_discarded(), "tokenizer " + file, "is not valid JSON");
  MIXPREC_CHECK(j.is_object(), "tokenizer " + file, "is not a JSON object");
  return j;
}

}  // namespace mixprec::data::hf
