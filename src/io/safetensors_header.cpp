// Validation of a safetensors header. Everything a hostile or corrupt file can claim (lengths,
// shapes, offsets) is checked against the byte counts before the reader allocates anything.
#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "mixprec/core/error.h"
#include "mixprec/io/safetensors.h"
#include "safetensors_fail.h"
#include "text_bounds.h"

namespace mixprec::io {
namespace {

using nlohmann::json;

// The header may not exceed this (the reference implementation's limit is 100 MB).
constexpr uint64_t kMaxHeader = 100'000'000;
constexpr uint64_t kInt64Max = std::numeric_limits<int64_t>::max();

// A JSON integer >= 0 that fits int64. Floats and booleans are refused: nlohmann's get<> would
// convert them (a float beyond the integer range even with undefined behaviour).
bool is_count(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

// The dims of a shape, each a JSON integer in [0, 2^63).
Shape parse_shape(const json& v, const std::string& source, const std::string& where) {
  if (!v.is_array()) fail_safetensors(source, where + "shape must be an array of integers");
  Shape shape;
  shape.reserve(v.size());
  for (const json& d : v) {
    if (!is_count(d) || d.get<uint64_t>() > kInt64Max)
      fail_safetensors(
          source, where + "shape " + quote_prefix(v.dump()) + " must hold integers in [0, 2^63)");
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

// Bytes of a tensor of this shape and dtype. The product of the non-zero dims must fit too:
// strides are computed from them even when a zero dim makes the tensor empty.
uint64_t shape_bytes(const Shape& shape, DType dtype, const std::string& source,
                     const std::string& where) {
  uint64_t extent = dtype_size(dtype);
  bool empty = false;
  for (const int64_t d : shape) {
    if (d == 0) {
      empty = true;
      continue;
    }
    if (extent > kInt64Max / static_cast<uint64_t>(d))
      fail_safetensors(source, where + "shape " + shape_to_string(shape) + " of " +
                                   dtype_name(dtype) + " spans more than 2^63 bytes");
    extent *= static_cast<uint64_t>(d);
  }
  return empty ? 0 : extent;
}

SafetensorsEntry parse_entry(const std::string& name, const json& entry, uint64_t data_size,
                             const std::string& source) {
  const std::string where = "tensor '" + name + "': ";
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets"))
    fail_safetensors(source, where + "needs dtype, shape and data_offsets");
  SafetensorsEntry e;
  e.name = name;
  const json& dtype = entry.at("dtype");
  if (!dtype.is_string())
    fail_safetensors(source, where + "dtype must be a string, got " + quote_prefix(dtype.dump()));
  try {
    e.dtype = parse_safetensors_dtype(dtype.get<std::string>());
  } catch (const Error& ex) {
    fail_safetensors(source, where + ex.what());
  }
  e.shape = parse_shape(entry.at("shape"), source, where);
  const json& offsets = entry.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !is_count(offsets[0]) || !is_count(offsets[1]))
    fail_safetensors(source, where + "data_offsets must be [begin, end], two integers >= 0, got " +
                                 quote_prefix(offsets.dump()));
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size)
    fail_safetensors(source, where + "data_offsets [" + std::to_string(e.begin) + ", " +
                                 std::to_string(e.end) + "] outside the " +
                                 std::to_string(data_size) + "-byte data section");
  const uint64_t bytes = e.end - e.begin;
  if (bytes != shape_bytes(e.shape, e.dtype, source, where))
    fail_safetensors(source, where + std::to_string(bytes) + " bytes for shape " +
                                 shape_to_string(e.shape) + " of " + dtype_name(e.dtype));
  return e;
}

// The JSON text, refusing a tensor name that appears twice (nlohmann would keep the last one
// silently: which bytes a name means must not depend on that).
json parse_json(const char* begin, const char* end, const std::string& source) {
  std::set<std::string> names;
  std::string repeated;
  const json::parser_callback_t note_names = [&](int depth, json::parse_event_t event,
                                                 json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 &&
        !names.insert(parsed.get<std::string>()).second && repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  // Bounded first: printing (and, in older nlohmann versions, destroying) a value recurses
  // once per level, so a header nested 80k deep would overflow the stack.
  const int depth = json_nesting_depth(std::string_view(begin, static_cast<size_t>(end - begin)));
  if (depth > kMaxNesting)
    fail_safetensors(source, "header nests " + std::to_string(depth) + " levels deep (at most " +
                                 std::to_string(kMaxNesting) + ")");
  json header;
  try {
    header = json::parse(begin, end, note_names);
  } catch (const json::exception& e) {
    fail_safetensors(source, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail_safetensors(source, "header is not a JSON object");
  if (!repeated.empty())
    fail_safetensors(source, "key '" + repeated + "' appears twice in the header");
  return header;
}

}  // namespace

uint64_t safetensors_header_length(std::span<const std::byte> first_bytes, uint64_t file_size,
                                   const std::string& source) {
  if (file_size < 8)
    fail_safetensors(source, "file is " + std::to_string(file_size) + " bytes: no header");
  if (first_bytes.size() < 8) fail_safetensors(source, "the file's first 8 bytes were not read");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = header_len << 8 | static_cast<uint8_t>(first_bytes[static_cast<size_t>(i)]);
  if (header_len > kMaxHeader || header_len > file_size - 8)
    fail_safetensors(source, "header length " + std::to_string(header_len) + " does not fit a " +
                                 std::to_string(file_size) + "-byte file");
  return header_len;
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> prefix, uint64_t file_size,
                                           const std::string& source) {
  const uint64_t header_len = safetensors_header_length(prefix, file_size, source);
  if (prefix.size() < 8 + header_len) fail_safetensors(source, "the file ended inside its header");
  SafetensorsHeader out;
  out.data_start = 8 + header_len;
  out.data_size = file_size - out.data_start;
  const auto* text = reinterpret_cast<const char*>(prefix.data()) + 8;
  const json header = parse_json(text, text + header_len, source);

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail_safetensors(source, "__metadata__ is not an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          fail_safetensors(source, "__metadata__ key '" + k + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    out.entries.push_back(parse_entry(name, entry, out.data_size, source));
  }
  // The data section must be covered exactly once (the format forbids holes and overlaps).
  std::sort(out.entries.begin(), out.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
            });
  uint64_t covered = 0;
  for (const SafetensorsEntry& e : out.entries) {
    if (e.begin != covered)
      fail_safetensors(source, e.begin < covered
                                   ? "tensors overlap at byte " + std::to_string(e.begin)
                                   : "unreferenced bytes at " + std::to_string(covered));
    covered = e.end;
  }
  if (covered != out.data_size)
    fail_safetensors(
        source, std::to_string(out.data_size - covered) + " trailing bytes not used by any tensor");
  return out;
}

}  // namespace mixprec::io
