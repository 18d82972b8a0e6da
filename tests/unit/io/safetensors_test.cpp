// safetensors: byte layout against the spec written out by hand, round trips of every dtype,
// validation errors that name the file and key, and atomic replacement.
#include "mixprec/io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/storage_types.h"
#include "support/temp_files.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  // Writes raw bytes: an 8-byte little-endian length, the header text, then `data`.
  std::string raw(const std::string& name, const std::string& header, const std::string& data,
                  uint64_t claimed_len = ~uint64_t{0}) {
    const uint64_t len = claimed_len == ~uint64_t{0} ? header.size() : claimed_len;
    std::ofstream out(file(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header << data;
    return file(name);
  }

  mixprec::testing::TempDir tmp_;  // removed with everything in it after each test
  fs::path dir_ = tmp_.path();
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void expect_error(const std::string& path, const std::string& fragment) {
  try {
    load_safetensors(path);
    ADD_FAILURE() << "no error for " << fragment;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }
}

TEST_F(Safetensors, ByteLayoutFollowsTheSpec) {
  const Tensor t = Tensor::from_vector<float>({1.0f, -2.0f}, {2});
  save_safetensors(file("a.safetensors"), {{"w", t}}, {{"format", "pt"}});
  const std::string bytes = read_bytes(file("a.safetensors"));
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  EXPECT_EQ(len % 8, 0u) << "data should start 8-byte aligned";
  const std::string header = bytes.substr(8, len);
  EXPECT_NE(header.find(R"("w":{"data_offsets":[0,8],"dtype":"F32","shape":[2]})"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find(R"("__metadata__":{"format":"pt"})"), std::string::npos) << header;
  ASSERT_EQ(bytes.size(), 8 + len + 8);
  // 1.0f = 0x3F800000, -2.0f = 0xC0000000, little-endian
  EXPECT_EQ(bytes.substr(8 + len), std::string("\x00\x00\x80\x3F\x00\x00\x00\xC0", 8));
}

TEST_F(Safetensors, ReadsAHandWrittenFile) {
  // Two bf16 values (1.0 = 0x3F80, -0.5 = 0xBF00) and one i64, as another writer would lay out.
  const std::string header = R"({"b":{"dtype":"I64","shape":[],"data_offsets":[4,12]},)"
                             R"("a":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]}})";
  std::string data("\x80\x3F\x00\xBF", 4);
  const int64_t seven = 7;
  data.append(reinterpret_cast<const char*>(&seven), 8);
  const SafetensorsFile f = load_safetensors(raw("h.safetensors", header, data));
  EXPECT_EQ(f.at("a").dtype(), DType::bf16);
  EXPECT_EQ(f.at("a").shape(), (Shape{1, 2}));
  EXPECT_EQ(f.at("a").to_doubles(), (std::vector<double>{1.0, -0.5}));
  EXPECT_EQ(f.at("b").item(), 7.0);
  EXPECT_TRUE(f.metadata.empty());
}

TEST_F(Safetensors, RoundTripsEveryDTypeAndStridedViews) {
  Generator gen(3);
  TensorList list;
  for (const DTypeInfo& d : kDTypeTable) {
    Tensor t = Tensor::arange(-3, 9, 1, DType::f64).view({3, 4}).to(d.dtype);
    list.emplace_back(std::string("t_") + d.name, t);
  }
  const Tensor base = Tensor::normal({4, 6}, 0, 1, gen, DType::bf16);
  list.emplace_back("transposed", base.transpose(0, 1));
  list.emplace_back("sliced", base.slice(1, 1, 6, 2));
  list.emplace_back("empty", Tensor::empty({0, 5}, DType::f16));
  list.emplace_back("scalar", Tensor::full({}, 2.5, DType::f32));
  save_safetensors(file("r.safetensors"), list, {{"step", "12"}, {"config", "x = 1"}});
  const SafetensorsFile f = load_safetensors(file("r.safetensors"));
  ASSERT_EQ(f.tensors.size(), list.size());
  for (const auto& [name, t] : list) {
    SCOPED_TRACE(name);
    const Tensor& back = f.at(name);
    EXPECT_EQ(back.dtype(), t.dtype());
    EXPECT_EQ(back.shape(), t.shape());
    const Tensor c = t.contiguous();
    ASSERT_EQ(back.nbytes(), c.nbytes());
    EXPECT_EQ(std::memcmp(back.raw_data(), c.raw_data(), c.nbytes()), 0);
  }
  EXPECT_EQ(f.metadata.at("step"), "12");
  EXPECT_EQ(f.metadata.at("config"), "x = 1");
}

TEST_F(Safetensors, RejectsMalformedFilesNamingFileAndKey) {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');
  expect_error(raw("empty_header", "", ""), "not valid JSON");
  {
    std::ofstream(file("tiny"), std::ios::binary) << "abc";
    expect_error(file("tiny"), "no header");
  }
  expect_error(raw("biglen", "{}", "", 1'000'000), "header length 1000000");
  expect_error(raw("json", "{\"a\": [", eight), "not valid JSON");
  expect_error(raw("dtype", R"({"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", eight),
               "tensor 'a'");
  expect_error(raw("shape", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
               "tensor 'a': 8 bytes for shape [3]");
  expect_error(raw("range", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight),
               "outside the 8-byte data section");
  expect_error(raw("missing", R"({"a":{"dtype":"F32","shape":[2]}})", eight), "tensor 'a'");
  expect_error(
      raw("overlap", "{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          eight),
      "overlap");
  expect_error(raw("hole", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight),
               "unreferenced bytes");
  expect_error(raw("trailing", "{" + ok_entry + "}", eight + "xx"), "trailing bytes");
  expect_error(raw("bool", R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
                   std::string("\x01\x02", 2)),
               "BOOL data");
  // A shape whose byte count wraps around 2^64 must not pass as 0 bytes.
  expect_error(
      raw("wrap", R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})",
          ""),
      "tensor 'a'");
  expect_error(file("does_not_exist"), "cannot open");
  const SafetensorsFile f = load_safetensors(raw("fine", "{" + ok_entry + "}", eight));
  try {
    f.at("nope");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos);
  }
}

TEST_F(Safetensors, FailedSaveLeavesTheOldFileAndNoTemporaries) {
  const std::string path = file("ckpt.safetensors");
  save_safetensors(path, {{"w", Tensor::ones({3})}});
  const std::string before = read_bytes(path);
  // A meta tensor cannot be saved: the error comes before anything replaces the file.
  EXPECT_THROW(save_safetensors(path, {{"w", Tensor::ones({3})},
                                       {"m", Tensor::empty({2}, DType::f32, Device::meta)}}),
               Error);
  EXPECT_THROW(save_safetensors(path, {{"w", Tensor::ones({3})}, {"w", Tensor::ones({3})}}), Error);
  EXPECT_EQ(read_bytes(path), before);
  // Writing into a directory that does not exist fails cleanly too.
  EXPECT_THROW(save_safetensors(file("no/such/dir/x.safetensors"), {{"w", Tensor::ones({1})}}),
               Error);
  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
}

TEST_F(Safetensors, OverwriteReplacesTheFileWhole) {
  const std::string path = file("x.safetensors");
  save_safetensors(path, {{"a", Tensor::zeros({1000})}});
  save_safetensors(path, {{"b", Tensor::ones({2}, DType::bf16)}});
  const SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.at("b").to_doubles(), (std::vector<double>{1.0, 1.0}));
}

// Found by review while writing the fuzzer: nlohmann's get<> converts floats and booleans to
// integers (2.5 -> 2, true -> 1; a float beyond int64 is undefined behaviour), so these were
// accepted or were UB. Shapes and offsets must be JSON integers.
TEST_F(Safetensors, RejectsShapesAndOffsetsThatAreNotIntegers) {
  const std::string eight(8, '\0');
  const auto entry = [](const std::string& shape, const std::string& offsets) {
    return R"({"a":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}";
  };
  expect_error(raw("float_dim", entry("[2.5]", "[0,8]"), eight), "tensor 'a': shape [2.5]");
  expect_error(raw("bool_dim", entry("[true,2]", "[0,8]"), eight), "tensor 'a': shape [true,2]");
  expect_error(raw("huge_dim", entry("[1e300]", "[0,8]"), eight), "tensor 'a': shape [1e+300]");
  expect_error(raw("neg_dim", entry("[-2]", "[0,8]"), eight), "tensor 'a': shape [-2]");
  expect_error(raw("big_dim", entry("[9223372036854775808]", "[0,8]"), eight), "tensor 'a'");
  expect_error(raw("float_off", entry("[2]", "[0,8.0]"), eight), "data_offsets must be");
  expect_error(raw("neg_off", entry("[2]", "[-8,0]"), eight), "data_offsets must be");
  expect_error(raw("three_off", entry("[2]", "[0,4,8]"), eight), "data_offsets must be");
  expect_error(raw("shape_obj", entry("{}", "[0,8]"), eight), "shape must be an array");
  expect_error(raw("dtype_num", R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", eight),
               "dtype must be a string");
  // The integer spellings of the same entry are fine.
  EXPECT_EQ(load_safetensors(raw("ok", entry("[2]", "[0,8]"), eight)).at("a").numel(), 2);
}

// An empty tensor's other dims still make its strides: [0, 2^32, 2^32] of F32 passed as 0
// bytes, then computing its strides overflowed int64 (UB). Empty shapes that fit stay fine.
TEST_F(Safetensors, RejectsEmptyShapesWhoseOtherDimsOverflow) {
  expect_error(
      raw("zero_giant",
          R"({"a":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})", ""),
      "tensor 'a': shape [0, 4294967296, 4294967296] of f32 spans more than 2^63 bytes");
  const SafetensorsFile f = load_safetensors(
      raw("zero_fits",
          R"({"a":{"dtype":"F32","shape":[0,1073741824,1073741824],"data_offsets":[0,0]}})", ""));
  EXPECT_EQ(f.at("a").shape(), (Shape{0, 1073741824, 1073741824}));
  EXPECT_EQ(f.at("a").nbytes(), 0u);
}

// nlohmann keeps the last of two equal keys silently; which bytes a name means must not
// depend on that.
TEST_F(Safetensors, RejectsATensorNameThatAppearsTwice) {
  expect_error(raw("dup",
                   R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                   R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                   std::string(8, '\0')),
               "key 'a' appears twice");
}

// std::filesystem::is_directory threw std::filesystem_error (ENAMETOOLONG) past the reader.
TEST_F(Safetensors, AnOverlongPathIsAMixprecError) {
  expect_error(file(std::string(5000, 'x')), "cannot open");
}

TEST_F(Safetensors, ParsesFromMemoryExactlyAsFromAFile) {
  const std::string path = file("m.safetensors");
  save_safetensors(path,
                   {{"w", Tensor::arange(0, 6, 1, DType::f64).view({2, 3}).to(DType::bf16)},
                    {"s", Tensor::full({}, 3.0, DType::i64)},
                    {"e", Tensor::empty({0, 4}, DType::f16)}},
                   {{"k", "v"}});
  const std::string text = read_bytes(path);
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  const SafetensorsFile a = parse_safetensors(bytes, "in memory");
  const SafetensorsFile b = load_safetensors(path);
  EXPECT_EQ(a.path, "in memory");
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.tensors.size(), 3u);
  for (const auto& [name, t] : b.tensors) {
    SCOPED_TRACE(name);
    EXPECT_EQ(a.at(name).shape(), t.shape());
    EXPECT_EQ(a.at(name).to_doubles(), t.to_doubles());
  }
  // The header, by hand: entries in file order, w's 6 bf16, s's one i64, then e's no bytes.
  const SafetensorsHeader h = parse_safetensors_header(bytes, bytes.size(), "in memory");
  ASSERT_EQ(h.entries.size(), 3u);
  EXPECT_EQ(h.data_start % 8, 0u);
  EXPECT_EQ(h.data_size, 12u + 8u);
  EXPECT_EQ(h.data_start + h.data_size, bytes.size());
  EXPECT_EQ(h.entries[0].name, "w");
  EXPECT_EQ(h.entries[0].end, 12u);
  EXPECT_EQ(h.entries[1].name, "s");
  EXPECT_EQ(h.entries[1].begin, 12u);
  EXPECT_EQ(h.entries[1].end, 20u);
  EXPECT_EQ(h.entries[2].name, "e");
  EXPECT_EQ(h.entries[2].begin, 20u);
  EXPECT_EQ(h.entries[2].end, 20u);
  EXPECT_EQ(h.metadata.at("k"), "v");
}

// A checkpoint cut short anywhere (a torn copy, a full disk) is an error naming it, from
// memory and from a file alike; never a crash or a tensor made of missing bytes.
TEST_F(Safetensors, EveryTruncationOfAValidFileIsAnError) {
  const std::string path = file("whole.safetensors");
  save_safetensors(path,
                   {{"a", Tensor::ones({3}, DType::f32)}, {"b", Tensor::ones({2}, DType::u8)}},
                   {{"step", "7"}});
  const std::string whole = read_bytes(path);
  for (std::size_t len = 0; len < whole.size(); ++len) {
    SCOPED_TRACE(len);
    std::ofstream(file("cut"), std::ios::binary | std::ios::trunc) << whole.substr(0, len);
    expect_error(file("cut"), "safetensors");
    const auto* first = reinterpret_cast<const std::byte*>(whole.data());
    const std::vector<std::byte> bytes(first, first + len);
    EXPECT_THROW(parse_safetensors(bytes, "cut"), Error);
  }
}

}  // namespace
}  // namespace mixprec::io
