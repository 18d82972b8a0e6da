// safetensors files (the format of Hugging Face's `safetensors`): an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}},
// then the tensors' bytes. Used for checkpoints, exports and the PyTorch reference fixtures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::io {

using TensorList = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  Metadata metadata;

  // The tensor named `name`; throws mixprec::Error naming the file and the key when absent.
  const Tensor& at(const std::string& name) const;
  std::string path;  // where it was read from, for error messages
};

// safetensors' dtype spelling ("BF16", "F8_E4M3", ...) of a dtype, and back.
const char* safetensors_dtype_name(DType dtype);
DType parse_safetensors_dtype(const std::string& name);

// Writes the tensors (any strides; cpu only) in the given order. The file appears atomically:
// it is written to a temporary name beside `path`, flushed to disk, then renamed over `path`,
// so a crash leaves either the old file or the new one, never a torn one.
void save_safetensors(const std::string& path, const TensorList& tensors,
                      const Metadata& metadata = {});

// One tensor of a validated header: its bytes are [begin, end) of the data section.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// A validated header. The entries, sorted by offset, cover the data section exactly once.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;
  Metadata metadata;
  uint64_t data_start = 0;  // 8 + the header length: the data section's first byte in the file
  uint64_t data_size = 0;   // file size - data_start
};

// The header length in a file's first 8 bytes (little-endian), checked against the file size
// and a 100 MB cap (the reference implementation's), so that a corrupt length is never
// allocated. `first_bytes` holds the file's first min(8, file_size) bytes.
uint64_t safetensors_header_length(std::span<const std::byte> first_bytes, uint64_t file_size,
                                   const std::string& source);

// Validates the header of a file of `file_size` bytes, of which `prefix` holds the first ones
// (at least the 8-byte length and the header it announces, when the file has them): header
// size, JSON, dtypes, integer shapes against byte ranges, ranges inside the data and covering
// it without overlap. Nothing is allocated beyond the header itself, whatever shapes it
// claims. Errors are mixprec::Error naming `source` and the key.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> prefix, uint64_t file_size,
                                           const std::string& source);

// Reads a whole file held in memory (`source` names it in errors, and becomes the result's
// path). Validates as parse_safetensors_header, then BOOL bytes (0 or 1 only).
SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, const std::string& source);

// Reads and validates a file as parse_safetensors does, without holding the whole file in
// memory. Errors name the file and the key.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace mixprec::io
