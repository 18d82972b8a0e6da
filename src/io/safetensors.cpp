#include "mixprec/io/safetensors.h"

#include <nlohmann/json.hpp>

#include "text_bounds.h"

#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "safetensors_fail.h"

namespace mixprec::io {
namespace {

using nlohmann::json;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kNames[] = {
    {DType::f64, "F64"},
    {DType::f32, "F32"},
    {DType::bf16, "BF16"},
    {DType::f16, "F16"},
    {DType::f8_e4m3fn, "F8_E4M3"},
    {DType::f8_e5m2, "F8_E5M2"},
    {DType::i32, "I32"},
    {DType::i64, "I64"},
    {DType::u8, "U8"},
    {DType::boolean, "BOOL"},
    // mixprec's one E2M1 value a byte: not safetensors' F4 (two a byte), so another reader
    // refuses the file instead of misreading it.
    {DType::f4_e2m1fn, "F4_E2M1_UNPACKED"}};
static_assert(std::size(kNames) == kNumDTypes, "every dtype needs a safetensors name");

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  return kNames[static_cast<int>(dtype)].name;
}

DType parse_safetensors_dtype(const std::string& name) {
  for (const DTypeName& d : kNames)
    if (name == d.name) return d.dtype;
  throw Error("safetensors", "unsupported dtype '" + quote_prefix(name) + "'");
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) fail_safetensors(path, "no tensor named '" + name + "'");
  return it->second;
}

void save_safetensors(const std::string& path, const TensorList& tensors,
                      const Metadata& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__")
      fail_safetensors(path, "'__metadata__' is reserved, not a tensor name");
    if (header.contains(name)) fail_safetensors(path, "tensor name '" + name + "' appears twice");
    if (!t.defined()) fail_safetensors(path, "tensor '" + name + "' is undefined");
    if (t.is_meta())
      fail_safetensors(path, "tensor '" + name + "' is on the meta device: nothing to save");
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

}  // namespace mixprec::io
