// Writes the fuzzer's seed inputs into a directory: valid files from save_safetensors (every
// dtype, 0-d and empty tensors, metadata) and hand-made edge cases of the format. scripts/fuzz.sh
// regenerates them on every run, so the seeds follow the writer.
//
//   write_safetensors_seeds DIR
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "mixprec/io/checkpoint_store.h"
#include "mixprec/io/safetensors.h"

namespace {

using namespace mixprec;
using namespace mixprec::io;
namespace fs = std::filesystem;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// `depth` JSON arrays, one inside the other.
std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// An 8-byte little-endian length (the header's own unless `claimed` says otherwise), the
// header text, then the data.
std::string raw(const std::string& header, const std::string& data = "",
                uint64_t claimed = ~uint64_t{0}) {
  uint64_t len = claimed == ~uint64_t{0} ? header.size() : claimed;
  std::string out;
  for (int i = 0; i < 8; ++i, len >>= 8) out += static_cast<char>(len & 0xFF);
  return out + header + data;
}

void write_valid(const fs::path& dir) {
  TensorList every_dtype;
  for (const DTypeInfo& d : kDTypeTable) {
    const Tensor t = Tensor::arange(0, 6, 1, DType::f64).view({2, 3}).to(d.dtype);
    every_dtype.emplace_back(std::string("t_") + d.name, t);
  }
  save_safetensors((dir / "valid_every_dtype").string(), every_dtype,
                   {{"format", "pt"}, {"step", "12"}});
  save_safetensors((dir / "valid_scalar_and_empty").string(),
                   {{"scalar", Tensor::full({}, 2.5, DType::f32)},
                    {"empty", Tensor::empty({0, 5}, DType::f16)},
                    {"empty_3d", Tensor::empty({4, 0, 2}, DType::bf16)},
                    {"flags", Tensor::full({3}, 1.0, DType::boolean)}});
  save_safetensors((dir / "valid_metadata_only").string(), {}, {{"config", "x = 1\ny = [2]"}});
  save_safetensors((dir / "valid_nothing").string(), {});
  // The first tensor of a valid file cut short: a truncated checkpoint.
  const std::string whole = read_bytes(dir / "valid_every_dtype");
  write_bytes(dir / "truncated_in_data", whole.substr(0, whole.size() - 5));
  write_bytes(dir / "truncated_in_header", whole.substr(0, 40));
  // A checkpoint as the store writes it: metadata 'tensor_checksums' over its tensors.
  const fs::path store_dir = dir / "store";
  const std::string saved =
      CheckpointStore(store_dir.string(), 0)
          .save(1, TensorMap(every_dtype.begin(), every_dtype.end()), {{"format", "pt"}});
  fs::rename(saved, dir / "valid_checksummed");
  fs::remove_all(store_dir);
}

void write_edge_cases(const fs::path& dir) {
  const std::string f32x2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\0');
  const struct {
    const char* name;
    std::string bytes;
  } cases[] = {
      {"empty_file", ""},
      {"seven_bytes", std::string(7, '\0')},
      {"zero_length_header", raw("")},
      {"length_past_end", raw("{}", "", 1000)},
      {"length_all_ones", raw("{}", "", ~uint64_t{0} - 1)},
      {"padded_header", raw("{}      ")},
      {"not_an_object", raw("[1,2]")},
      {"bad_json", raw(R"({"a":{"dtype":)")},
      {"two_f32", raw(f32x2, std::string("\x00\x00\x80\x3F\x00\x00\x00\xC0", 8))},
      {"bool_byte_2",
       raw(R"({"b":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x02")},
      {"unknown_dtype", raw(R"({"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", eight)},
      {"dtype_not_string", raw(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", eight)},
      {"float_dim", raw(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", eight)},
      {"huge_float_dim",
       raw(R"({"a":{"dtype":"F32","shape":[1e300],"data_offsets":[0,8]}})", eight)},
      {"bool_dim", raw(R"({"a":{"dtype":"F32","shape":[true,2],"data_offsets":[0,8]}})", eight)},
      {"negative_dim", raw(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight)},
      {"wrapping_shape",
       raw(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})")},
      {"zero_dim_then_giant",
       raw(R"({"a":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})")},
      {"giant_shape_small_file",
       raw(R"({"a":{"dtype":"F64","shape":[100000,100000],"data_offsets":[0,8]}})", eight)},
      {"negative_offset", raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", eight)},
      {"float_offset", raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}})", eight)},
      {"three_offsets", raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", eight)},
      {"offset_past_end", raw(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight)},
      {"overlap", raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                      eight)},
      {"hole", raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight)},
      {"trailing_bytes", raw(f32x2, eight + "xx")},
      {"duplicate_name", raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                             eight)},
      {"metadata_not_object", raw(R"({"__metadata__":[1]})")},
      {"metadata_not_strings", raw(R"({"__metadata__":{"k":{"nested":1}}})")},
      {"unicode_name",
       raw(R"({"\u00e9\u4e2d":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "\x07")},
      {"empty_name", raw(R"({"":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})", eight)},
      {"deep_nesting", raw(std::string(5000, '[') + std::string(5000, ']'))},
      // Values nested as deep as those that overflowed the stack before the depth bound
      // (80k levels); scripts/fuzz.sh's input length reaches them.
      {"deep_shape",
       raw(R"({"a":{"dtype":"F32","shape":)" + nested(80'000) + R"(,"data_offsets":[0,4]}})",
           "abcd")},
      {"deep_metadata", raw(R"({"__metadata__":{"k":)" + nested(80'000) + "}}")},
  };
  for (const auto& c : cases) write_bytes(dir / c.name, c.bytes);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir);
  write_valid(dir);
  write_edge_cases(dir);
  return 0;
}
