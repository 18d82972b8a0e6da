// CheckpointStore: bit-exact round trips of every dtype with metadata, keep_last rotation,
// latest() skipping corrupt files with a warning, failed saves (a full "disk", a parent that
// is a file, a target that cannot be replaced) leaving earlier checkpoints and no temporaries,
// and validation errors naming the file and the entry.
#include "mixprec/io/checkpoint_store.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "support/op_testing.h"
#include "support/temp_files.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;

class CheckpointStoreTest : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::string ckpt_dir() const { return file("ckpt"); }

  // A store whose warnings are collected in warnings_.
  CheckpointStore store(int keep_last) {
    return CheckpointStore(ckpt_dir(), keep_last,
                           [this](const std::string& w) { warnings_.push_back(w); });
  }

  mixprec::testing::TempDir tmp_;  // removed with everything in it after each test
  fs::path dir_ = tmp_.path();
  std::vector<std::string> warnings_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Every byte pattern a dtype allows (random bytes; bool only 0/1): NaN payloads, subnormals
// and infinities included, so "bit-exact" is tested on more than tame values.
Tensor random_bits(const Shape& shape, DType dtype, uint32_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  std::mt19937 rng(seed);
  auto* b = static_cast<unsigned char*>(t.raw_data());
  for (std::size_t i = 0; i < t.nbytes(); ++i)
    b[i] = static_cast<unsigned char>(dtype == DType::boolean ? rng() & 1 : rng());
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), ac.nbytes()) == 0;
}

std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

using mixprec::testing::error_of;

TEST_F(CheckpointStoreTest, RoundTripsEveryDTypeBitExactWithMetadata) {
  TensorMap tensors;
  uint32_t seed = 1;
  for (const DTypeInfo& d : kDTypeTable)
    tensors[std::string("model.") + d.name] = random_bits({3, 5}, d.dtype, seed++);
  tensors["scalar"] = Tensor::full({}, -0.0, DType::f32);
  tensors["empty"] = Tensor::empty({0, 4}, DType::bf16);
  tensors["strided"] = random_bits({4, 6}, DType::f16, 99).transpose(0, 1);
  const Metadata meta{{"config", "[model]\nname = \"gpt\"\nd_model = 256\n"},
                      {"scaler", R"({"scale": 65536.0, "growth_tracker": 3})"},
                      {"data", R"({"epoch": 1, "position": 12345, "rng": [1, 2, 3, 4]})"},
                      {"note", "ünïcode ✓ and a \"quote\"\ttab"}};
  CheckpointStore s = store(3);
  const std::string path = s.save(42, tensors, meta);
  EXPECT_EQ(path, file("ckpt/step-00000042.safetensors"));
  const Checkpoint c = load_checkpoint(path);
  EXPECT_EQ(c.step, 42);
  EXPECT_EQ(c.path, path);
  EXPECT_EQ(c.metadata, meta);
  ASSERT_EQ(c.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_EQ(c.tensors.count(name), 1u);
    EXPECT_TRUE(same_bits(c.tensors.at(name), t));
  }
  // A second bit pattern in the same file name replaces the first whole.
  tensors["model.f32"] = random_bits({2}, DType::f32, 1234);
  s.save(42, tensors, {});
  const Checkpoint again = load_checkpoint(path);
  EXPECT_TRUE(same_bits(again.tensors.at("model.f32"), tensors["model.f32"]));
  EXPECT_TRUE(again.metadata.empty());
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(CheckpointStoreTest, FileNamesAreCanonical) {
  CheckpointStore s = store(1);
  EXPECT_EQ(fs::path(s.path_for(7)).filename(), "step-00000007.safetensors");
  EXPECT_EQ(fs::path(s.path_for(123456789)).filename(), "step-123456789.safetensors");
  EXPECT_EQ(CheckpointStore::step_of("step-00000007.safetensors"), 7);
  EXPECT_EQ(CheckpointStore::step_of("step-123456789.safetensors"), 123456789);
  EXPECT_EQ(CheckpointStore::step_of("step-000000007.safetensors"), std::nullopt);  // alias
  EXPECT_EQ(CheckpointStore::step_of("step-0000007.safetensors"), std::nullopt);
  EXPECT_EQ(CheckpointStore::step_of("step-00000007.safetensors.tmp.Ab12Cd"), std::nullopt);
  EXPECT_EQ(CheckpointStore::step_of("step-0000000x.safetensors"), std::nullopt);
  EXPECT_EQ(CheckpointStore::step_of("model.safetensors"), std::nullopt);
  EXPECT_NE(error_of([&] { s.path_for(-1); }).find("step must be >= 0, got -1"), std::string::npos);
  EXPECT_NE(error_of([&] { CheckpointStore(ckpt_dir(), -2); }).find("keep_last"),
            std::string::npos);
}

TEST_F(CheckpointStoreTest, KeepsTheLastNAndNeverTheOneJustWritten) {
  CheckpointStore s = store(2);
  const TensorMap t{{"w", Tensor::ones({4})}};
  fs::create_directories(ckpt_dir());
  write_bytes(file("ckpt/notes.txt"), "not a checkpoint");
  for (int64_t step = 1; step <= 5; ++step) {
    s.save(step * 10, t);
    const std::vector<int64_t> expected =
        step == 1 ? std::vector<int64_t>{10} : std::vector<int64_t>{(step - 1) * 10, step * 10};
    EXPECT_EQ(s.steps(), expected) << "after step " << step * 10;
  }
  // Saving an older step (a run resumed from it) keeps it plus the newest other one.
  s.save(5, t);
  EXPECT_EQ(s.steps(), (std::vector<int64_t>{5, 50}));
  EXPECT_TRUE(fs::exists(file("ckpt/notes.txt"))) << "rotation deletes only checkpoints";
  // keep_last = 1 keeps exactly the one just written, even when older than the others.
  store(1).save(3, t);
  EXPECT_EQ(s.steps(), (std::vector<int64_t>{3}));
  // keep_last = 0 keeps everything.
  CheckpointStore all = store(0);
  for (int64_t step = 4; step < 9; ++step) all.save(step, t);
  EXPECT_EQ(all.steps(), (std::vector<int64_t>{3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(CheckpointStoreTest, LatestSkipsCorruptNewestFilesWithAWarning) {
  CheckpointStore s = store(0);
  EXPECT_EQ(s.latest(), std::nullopt) << "no directory yet";
  for (int64_t step = 1; step <= 3; ++step)
    s.save(step, {{"w", Tensor::full({8}, static_cast<double>(step))}}, {{"step", "x"}});
  ASSERT_EQ(s.latest(), s.path_for(3));
  EXPECT_TRUE(warnings_.empty());
  const std::string good = read_bytes(s.path_for(3));
  // Step 4: step 3's bytes cut short (a copy that died midway); step 3: garbage; a temporary
  // of step 9 that a killed save left behind; and a directory named like a checkpoint.
  write_bytes(s.path_for(4), good.substr(0, good.size() - 5));
  write_bytes(s.path_for(3), "\x13garbage that is no checkpoint at all");
  write_bytes(s.path_for(9) + ".tmp.AbC123", good);
  fs::create_directories(s.path_for(12));

  const std::optional<Checkpoint> c = s.load_latest();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 2);
  EXPECT_EQ(c->tensors.at("w").to_doubles(), std::vector<double>(8, 2.0));
  ASSERT_EQ(warnings_.size(), 1u);
  const std::string& w = warnings_[0];
  EXPECT_NE(w.find(s.path_for(4)), std::string::npos) << w;
  EXPECT_NE(w.find(s.path_for(3)), std::string::npos) << w;
  EXPECT_NE(w.find("truncated"), std::string::npos) << w;
  EXPECT_EQ(w.find(".tmp."), std::string::npos) << "temporaries are not candidates: " << w;
  EXPECT_EQ(w.find("step-00000012"), std::string::npos) << w;
  EXPECT_EQ(s.latest(), s.path_for(2));

  // Nothing valid at all: nullopt, still with the warning.
  write_bytes(s.path_for(2), "");
  write_bytes(s.path_for(1), std::string(8, '\0'));
  warnings_.clear();
  EXPECT_EQ(s.latest(), std::nullopt);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find(s.path_for(1)), std::string::npos) << warnings_[0];
}

// Checks that the directory holds exactly the files `before` holds, byte for byte.
void expect_untouched(const CheckpointStore& s, const std::map<int64_t, std::string>& before) {
  std::vector<int64_t> steps;
  for (const auto& [step, bytes] : before) {
    steps.push_back(step);
    EXPECT_EQ(read_bytes(s.path_for(step)), bytes) << "step " << step;
  }
  EXPECT_EQ(s.steps(), steps);
  EXPECT_EQ(temporaries(s.dir()), std::vector<std::string>{});
}

TEST_F(CheckpointStoreTest, ADiskFullMidSaveLeavesEarlierCheckpointsAndNoTemporaries) {
  CheckpointStore s = store(1);
  s.save(1, {{"w", Tensor::ones({16})}});
  const std::map<int64_t, std::string> before{{1, read_bytes(s.path_for(1))}};
  // The file size limit makes write() fail with EFBIG part-way through the tensor data, the
  // way a full disk fails with ENOSPC.
  const TensorMap big{{"a", Tensor::ones({1024})}, {"b", Tensor::zeros({1 << 16})}};
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 16 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string err = error_of([&] { s.save(2, big); });
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(err.find(s.path_for(2)), std::string::npos) << err;
  EXPECT_NE(err.find("write failed"), std::string::npos) << err;
  expect_untouched(s, before);
  // With room again the same save works and rotation then removes step 1.
  s.save(2, big);
  EXPECT_EQ(s.steps(), (std::vector<int64_t>{2}));
}

TEST_F(CheckpointStoreTest, OtherFailedSavesLeaveEverythingAsItWas) {
  CheckpointStore s = store(1);
  s.save(1, {{"w", Tensor::ones({4})}});
  const std::map<int64_t, std::string> before{{1, read_bytes(s.path_for(1))}};
  // The target name is taken by a directory: the rename fails after the data was written.
  fs::create_directories(s.path_for(2));
  write_bytes(s.path_for(2) + "/keep", "x");
  std::string err = error_of([&] { s.save(2, {{"w", Tensor::zeros({4})}}); });
  EXPECT_NE(err.find(s.path_for(2)), std::string::npos) << err;
  expect_untouched(s, before);
  // A meta tensor has no bytes to save: refused before anything is written.
  err = error_of([&] { s.save(3, {{"m", Tensor::empty({2}, DType::f32, Device::meta)}}); });
  EXPECT_NE(err.find("'m'"), std::string::npos) << err;
  expect_untouched(s, before);

  // A store whose parent directory is a file.
  write_bytes(file("plain_file"), "x");
  CheckpointStore under_file(file("plain_file/ckpt"), 1);
  err = error_of([&] { under_file.save(1, {{"w", Tensor::ones({1})}}); });
  EXPECT_NE(err.find(file("plain_file/ckpt")), std::string::npos) << err;
  EXPECT_EQ(read_bytes(file("plain_file")), "x");
  EXPECT_EQ(under_file.steps(), std::vector<int64_t>{});
  EXPECT_EQ(under_file.latest(), std::nullopt);
  EXPECT_EQ(temporaries(dir_), std::vector<std::string>{});
}

class CheckpointValidation : public CheckpointStoreTest {
 protected:
  // Writes an 8-byte little-endian header length, the header, then the data.
  std::string raw(const std::string& name, const std::string& header, const std::string& data) {
    const uint64_t len = header.size();
    std::string bytes(reinterpret_cast<const char*>(&len), 8);
    write_bytes(file(name), bytes + header + data);
    return file(name);
  }
  // Expects load_checkpoint(path) to fail with a message naming the file and every fragment.
  void expect_error(const std::string& path, const std::vector<std::string>& fragments) {
    const std::string msg = error_of([&] { load_checkpoint(path); });
    ASSERT_FALSE(msg.empty()) << "no error for " << path;
    EXPECT_NE(msg.find("[checkpoint " + path + "]"), std::string::npos) << msg;
    for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg;
  }
};

TEST_F(CheckpointValidation, EveryErrorNamesTheFileAndTheEntry) {
  const std::string eight(8, '\0'), sixteen(16, '\0');
  // Truncated data: the last tensor is the one cut off.
  CheckpointStore s = store(0);
  const std::string path =
      s.save(5, {{"a.first", Tensor::ones({4})}, {"b.second", Tensor::ones({4}, DType::bf16)}});
  const std::string whole = read_bytes(path);
  write_bytes(path, whole.substr(0, whole.size() - 3));
  expect_error(path, {"tensor 'b.second'", "truncated"});
  // Truncated inside the header.
  write_bytes(path, whole.substr(0, 20));
  expect_error(path, {"truncated inside its header"});
  expect_error(raw("json", R"({"w": {"dtype": "F32", "shape": [2)", eight), {"not valid JSON"});
  expect_error(
      raw("range", R"({"w.range":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight),
      {"tensor 'w.range'", "outside the 8-byte data section"});
  expect_error(raw("overlap",
                   R"({"p.one":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                   R"("p.two":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                   sixteen),
               {"'p.one' [0, 12)", "'p.two' [8, 16)", "overlap"});
  expect_error(
      raw("hole", R"({"only":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", sixteen),
      {"before tensor 'only'"});
  expect_error(
      raw("trailing", R"({"last":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", sixteen),
      {"8 bytes after tensor 'last'"});
  expect_error(raw("dtype", R"({"w.dt":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", eight),
               {"tensor 'w.dt'", "'F12'"});
  expect_error(raw("shape", R"({"w.sh":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
               {"tensor 'w.sh'", "8 bytes for shape [3]"});
  expect_error(file("missing"), {"cannot open"});
}

}  // namespace
}  // namespace mixprec::io
