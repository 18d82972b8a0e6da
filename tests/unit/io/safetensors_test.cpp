// safetensors: byte layout against the spec written out by hand, round trips of every dtype,
// validation errors that name the file and key, and atomic replacement.
#include "mixprec/io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "mixprec/error.h"
#include "mixprec/numerics/storage_types.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mixprec_st_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
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

  fs::path dir_;
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

}  // namespace
}  // namespace mixprec::io
