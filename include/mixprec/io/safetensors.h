// safetensors files (the format of Hugging Face's `safetensors`): an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}},
// then the tensors' bytes. Used for checkpoints, exports and the PyTorch reference fixtures.
#pragma once

#include <map>
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

// Reads and validates a whole file: header size, JSON, dtypes, shapes against byte ranges,
// ranges inside the data and covering it without overlap. Errors name the file and the key.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace mixprec::io
