#include "mixprec/io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mixprec/error.h"
#include "mixprec/io/atomic_file.h"

namespace mixprec::io {
namespace {

using nlohmann::json;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kNames[] = {
    {DType::f64, "F64"},     {DType::f32, "F32"},           {DType::bf16, "BF16"},
    {DType::f16, "F16"},     {DType::f8_e4m3fn, "F8_E4M3"}, {DType::f8_e5m2, "F8_E5M2"},
    {DType::i32, "I32"},     {DType::i64, "I64"},           {DType::u8, "U8"},
    {DType::boolean, "BOOL"}};
static_assert(std::size(kNames) == kNumDTypes, "every dtype needs a safetensors name");

// The header may not exceed this (the reference implementation's limit is 100 MB).
constexpr uint64_t kMaxHeader = 100'000'000;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("safetensors " + path, what);
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  return kNames[static_cast<int>(dtype)].name;
}

DType parse_safetensors_dtype(const std::string& name) {
  for (const DTypeName& d : kNames)
    if (name == d.name) return d.dtype;
  throw Error("safetensors", "unsupported dtype '" + name + "'");
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) fail(path, "no tensor named '" + name + "'");
  return it->second;
}

void save_safetensors(const std::string& path, const TensorList& tensors,
                      const Metadata& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail(path, "'__metadata__' is reserved, not a tensor name");
    if (header.contains(name)) fail(path, "tensor name '" + name + "' appears twice");
    if (!t.defined()) fail(path, "tensor '" + name + "' is undefined");
    if (t.is_meta()) fail(path, "tensor '" + name + "' is on the meta device: nothing to save");
    const uint64_t bytes = t.nbytes();
    header[name] = {{"dtype", safetensors_dtype_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned

  const std::string where = "safetensors " + path;
  write_file_atomically(
      path,
      [&](int fd) {
        const uint64_t header_len = text.size();  // little-endian on every supported target
        write_all(fd, &header_len, sizeof header_len, where);
        write_all(fd, text.data(), text.size(), where);
        for (const auto& [name, t] : tensors) {
          const Tensor c = t.contiguous();
          write_all(fd, c.raw_data(), c.nbytes(), where);
        }
      },
      where);
}

SafetensorsFile load_safetensors(const std::string& path) {
  if (std::filesystem::is_directory(path)) fail(path, "is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (file_size < 8) fail(path, "file is " + std::to_string(file_size) + " bytes: no header");
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  if (header_len > kMaxHeader || header_len > file_size - 8)
    fail(path, "header length " + std::to_string(header_len) + " does not fit a " +
                   std::to_string(file_size) + "-byte file");
  std::string text(header_len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_len));
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;

  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");

  SafetensorsFile out;
  out.path = path;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path, "__metadata__ is not an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(path, "__metadata__ key '" + k + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "': ";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets"))
      fail(path, where + "needs dtype, shape and data_offsets");
    Entry e{name, DType::f32, {}, 0, 0};
    try {
      e.dtype = parse_safetensors_dtype(entry.at("dtype").get<std::string>());
      e.shape = entry.at("shape").get<Shape>();
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2) fail(path, where + "data_offsets must be [begin, end]");
      e.begin = offsets[0];
      e.end = offsets[1];
    } catch (const json::exception& ex) {
      fail(path, where + ex.what());
    } catch (const Error& ex) {
      fail(path, where + ex.what());
    }
    int64_t numel = 0;
    try {
      numel = shape_numel(e.shape);
    } catch (const Error& ex) {
      fail(path, where + ex.what());
    }
    if (e.begin > e.end || e.end > data_size)
      fail(path, where + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                     "] outside the " + std::to_string(data_size) + "-byte data section");
    // Compared by division: numel * size could wrap for a hostile shape.
    const uint64_t bytes = e.end - e.begin, esz = dtype_size(e.dtype);
    if (bytes % esz != 0 || bytes / esz != static_cast<uint64_t>(numel))
      fail(path, where + std::to_string(bytes) + " bytes for shape " + shape_to_string(e.shape) +
                     " of " + dtype_name(e.dtype));
    entries.push_back(std::move(e));
  }
  // The data section must be covered exactly once (the format forbids holes and overlaps);
  // checked before anything is allocated, so a hostile header cannot make us allocate much.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const Entry& e : entries) ranges.emplace_back(e.begin, e.end);
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  for (const auto& [b, e] : ranges) {
    if (b != covered)
      fail(path, b < covered ? "tensors overlap at byte " + std::to_string(b)
                             : "unreferenced bytes at " + std::to_string(covered));
    covered = e;
  }
  if (covered != data_size)
    fail(path, std::to_string(data_size - covered) + " trailing bytes not used by any tensor");

  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    in.seekg(static_cast<std::streamoff>(data_start + e.begin));
    in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(e.end - e.begin));
    if (!in) fail(path, "tensor '" + e.name + "': file ended early");
    if (e.dtype == DType::boolean) {  // any other byte would be an invalid C++ bool
      const auto* b = static_cast<const uint8_t*>(t.raw_data());
      if (std::any_of(b, b + t.numel(), [](uint8_t v) { return v > 1; }))
        fail(path, "tensor '" + e.name + "': BOOL data holds a byte other than 0 or 1");
    }
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace mixprec::io
