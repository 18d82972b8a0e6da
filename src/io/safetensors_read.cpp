// Reading safetensors: from bytes in memory (parse_safetensors, what the fuzzer drives) and
// from a file (load_safetensors). Both validate through parse_safetensors_header first, so a
// tensor is allocated only once its bytes are known to be in the file.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "mixprec/core/error.h"
#include "mixprec/io/safetensors.h"
#include "safetensors_fail.h"

namespace mixprec::io {
namespace {

// Any byte but 0 or 1 would be an invalid C++ bool.
void check_bools(const Tensor& t, const SafetensorsEntry& e, const std::string& source) {
  if (e.dtype != DType::boolean) return;
  const auto* b = static_cast<const uint8_t*>(t.raw_data());
  if (std::any_of(b, b + t.numel(), [](uint8_t v) { return v > 1; }))
    fail_safetensors(source, "tensor '" + e.name + "': BOOL data holds a byte other than 0 or 1");
}

}  // namespace

SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, const std::string& source) {
  const SafetensorsHeader header = parse_safetensors_header(bytes, bytes.size(), source);
  SafetensorsFile out;
  out.path = source;
  out.metadata = header.metadata;
  for (const SafetensorsEntry& e : header.entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    // An empty tensor may have no storage at all: memcpy must not see its null pointer.
    if (e.end > e.begin)
      std::memcpy(t.raw_data(), bytes.data() + header.data_start + e.begin, e.end - e.begin);
    check_bools(t, e, source);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::error_code ec;  // the throwing overload would escape as std::filesystem_error
  const auto type = std::filesystem::status(path, ec).type();
  if (type == std::filesystem::file_type::directory)
    fail_safetensors(path, "is a directory, not a file");
  // Opening a FIFO would wait for a writer for ever; a device could be endless.
  if (!ec && type != std::filesystem::file_type::regular &&
      type != std::filesystem::file_type::not_found)
    fail_safetensors(path, "is not a regular file (a FIFO, socket or device)");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_safetensors(path, std::string("cannot open: ") + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  if (!in || end < 0) fail_safetensors(path, "cannot tell its size (not a regular file?)");
  const auto file_size = static_cast<uint64_t>(end);
  in.seekg(0);

  // The length first, checked, then exactly the header it announces.
  std::vector<std::byte> prefix(std::min<uint64_t>(file_size, 8));
  in.read(reinterpret_cast<char*>(prefix.data()), static_cast<std::streamsize>(prefix.size()));
  const uint64_t header_len = safetensors_header_length(prefix, file_size, path);
  prefix.resize(8 + header_len);
  in.read(reinterpret_cast<char*>(prefix.data()) + 8, static_cast<std::streamsize>(header_len));
  if (!in)
    fail_safetensors(path, "the file ended inside its header (did it shrink while being read?)");
  const SafetensorsHeader header = parse_safetensors_header(prefix, file_size, path);

  SafetensorsFile out;
  out.path = path;
  out.metadata = header.metadata;
  for (const SafetensorsEntry& e : header.entries) {  // in file order: one forward pass
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) {
      in.seekg(static_cast<std::streamoff>(header.data_start + e.begin));
      in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(e.end - e.begin));
      if (!in) fail_safetensors(path, "tensor '" + e.name + "': file ended early");
    }
    check_bools(t, e, path);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace mixprec::io
