#include "mixprec/io/checkpoint_layout.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include <vector>
#include "text_bounds.h"

namespace mixprec::io {
namespace {

struct Range {
  uint64_t begin, end;
  std::string name;
};

std::string range_text(const Range& r) {
  return "'" + r.name + "' [" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
}

}  // namespace

std::string diagnose_safetensors_layout(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const auto file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (file_size < 8) return "the file is truncated: " + std::to_string(file_size) + " bytes";
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  if (header_len > file_size - 8)
    return "the file is truncated inside its header, or is no safetensors file (" +
           std::to_string(header_len) + " header bytes announced, " +
           std::to_string(file_size - 8) + " present)";
  if (header_len > 100'000'000)  // the loader's cap: a corrupt length must not allocate GBs
    return "the header length " + std::to_string(header_len) + " is implausible";
  std::string text(header_len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_len));
  if (json_nesting_depth(text) > kMaxNesting) return "";  // the loader's message says it
  const nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return "";
  const uint64_t data_size = file_size - 8 - header_len;

  std::vector<Range> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__" || !entry.is_object() || !entry.contains("data_offsets")) continue;
    const nlohmann::json& off = entry["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      continue;
    ranges.push_back({off[0].get<uint64_t>(), off[1].get<uint64_t>(), name});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (const Range& r : ranges)
    if (r.end > data_size)
      return "tensor " + range_text(r) + " ends past the " + std::to_string(data_size) +
             "-byte data section: the file is truncated or its offsets are wrong";
  uint64_t covered = 0;
  std::string last;  // the tensor that ends at `covered`
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (i > 0 && ranges[i].begin < ranges[i - 1].end)
      return "tensors " + range_text(ranges[i - 1]) + " and " + range_text(ranges[i]) + " overlap";
    if (ranges[i].begin > covered)
      return "bytes [" + std::to_string(covered) + ", " + std::to_string(ranges[i].begin) +
             ") before tensor '" + ranges[i].name + "' belong to no tensor";
    if (ranges[i].end >= covered) {
      covered = ranges[i].end;
      last = ranges[i].name;
    }
  }
  if (!ranges.empty() && covered < data_size)
    return std::to_string(data_size - covered) + " bytes after tensor '" + last +
           "' belong to no tensor";
  return "";
}

}  // namespace mixprec::io
