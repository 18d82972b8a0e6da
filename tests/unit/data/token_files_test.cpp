// Pre-tokenized data: nanoGPT's raw uint16 train.bin / val.bin and llm.c's header + ids, opened
// without reading; ids beyond the vocabulary refused naming the file and byte offset; a 1 GB
// file opens without entering memory; hostile headers refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "data_testing.h"
#include "mixprec/core/error.h"
#include "mixprec/data/batches.h"
#include "mixprec/data/token_files.h"
#include "support/op_testing.h"

namespace mixprec::data {
namespace {

using namespace testing;
using mixprec::testing::error_of;

// ids as little-endian `width`-byte integers, after `header` (int32 values, padded to 256).
void write_ids(const fs::path& path, const std::vector<int64_t>& ids, int width,
               std::vector<int32_t> header = {}) {
  std::string bytes;
  if (!header.empty()) {
    header.resize(256, 0);
    bytes.append(reinterpret_cast<const char*>(header.data()), header.size() * 4);
  }
  for (const int64_t id : ids) {
    const auto v = static_cast<uint32_t>(id);
    bytes.append(reinterpret_cast<const char*>(&v), static_cast<std::size_t>(width));
  }
  write_file(path, bytes);
}

std::vector<int64_t> ids_of(const TokenSplit& s) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < s.size(); ++i) out.push_back(s.tokens[i]);
  return out;
}

std::vector<int64_t> ramp(int64_t n, int64_t scale) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i * scale % 50000);
  return v;
}

TEST(TokenFiles, NanoGptFolderGivesItsTrainAndValFiles) {
  TempDir dir;
  write_ids(dir / "shakespeare" / "train.bin", ramp(300, 997), 2);
  write_ids(dir / "shakespeare" / "val.bin", ramp(40, 13), 2);
  for (const fs::path& p : {dir / "shakespeare", dir / "shakespeare" / "train.bin"}) {
    std::vector<std::string> warnings;
    const TokenDataset ds = TokenDataset::open(options_for(p, dir / "run", warnings));
    EXPECT_EQ(ids_of(ds.train()), ramp(300, 997)) << p;
    EXPECT_EQ(ids_of(ds.validation()), ramp(40, 13)) << p;
    EXPECT_NE(ds.source().find("nanoGPT uint16 files"), std::string::npos) << ds.source();
    EXPECT_FALSE(ds.vocab_size());  // raw ids say nothing of their vocabulary
    EXPECT_TRUE(ds.cache_path().empty());
    EXPECT_FALSE(fs::exists(dir / "run"));  // nothing written: the files are the cache
  }
}

TEST(TokenFiles, LlmcHeadersGiveTheFormatAndVocabulary) {
  TempDir dir;
  // GPT-2 ids (uint16), a train file alone: split by the fraction.
  write_ids(dir / "tiny_train.bin", ramp(100, 503), 2, {20240520, 1, 100});
  std::vector<std::string> w;
  const TokenDataset gpt2 =
      TokenDataset::open(options_for(dir / "tiny_train.bin", dir.path(), w, 0.2));
  EXPECT_EQ(gpt2.train().size(), 80);
  EXPECT_EQ(gpt2.validation().size(), 20);
  EXPECT_EQ(ids_of(gpt2.validation())[0], ramp(100, 503)[80]);
  EXPECT_EQ(gpt2.vocab_size(), 50257);
  EXPECT_EQ(gpt2.validation().file_offset, 1024 + 80 * 2);
  // Llama 3 ids (uint32) with the val file beside.
  std::vector<int64_t> big{0, 70000, 128255, 5};
  write_ids(dir / "l3_train.bin", big, 4, {20240801, 7, 4});
  write_ids(dir / "l3_val.bin", {1, 2, 3}, 4, {20240801, 7, 3});
  const TokenDataset l3 = TokenDataset::open(options_for(dir / "l3_train.bin", dir.path(), w));
  EXPECT_EQ(ids_of(l3.train()), big);
  EXPECT_EQ(l3.validation().size(), 3);
  EXPECT_EQ(l3.vocab_size(), 128256);
  EXPECT_NE(l3.source().find("llm.c Llama 3 uint32 files"), std::string::npos) << l3.source();
}

TEST(TokenFiles, HostileFilesAreRefusedNamingThem) {
  TempDir dir;
  write_ids(dir / "short.bin", ramp(10, 1), 2, {20240520, 1, 11});  // one token missing
  std::string e = error_of([&] { open_token_file(dir / "short.bin"); });
  EXPECT_NE(e.find("short.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("llm.c header says 11 tokens"), std::string::npos) << e;
  write_ids(dir / "version.bin", ramp(10, 1), 2, {20240520, 3, 10});
  e = error_of([&] { open_token_file(dir / "version.bin"); });
  EXPECT_NE(e.find("version 3"), std::string::npos) << e;
  write_ids(dir / "negative.bin", ramp(10, 1), 2, {20240520, 1, -5});
  EXPECT_NE(error_of([&] { open_token_file(dir / "negative.bin"); }).find("-5 tokens"),
            std::string::npos);
  write_file(dir / "odd.bin", "abc");
  e = error_of([&] { open_token_file(dir / "odd.bin"); });
  EXPECT_NE(e.find("odd.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("3 bytes"), std::string::npos) << e;
  write_file(dir / "empty.bin", "");
  EXPECT_THROW(open_token_file(dir / "empty.bin"), Error);
  // A val file of another format than its train file.
  write_ids(dir / "x_train.bin", ramp(50, 1), 2, {20240520, 1, 50});
  write_ids(dir / "x_val.bin", ramp(50, 1), 2);
  std::vector<std::string> w;
  e = error_of([&] { TokenDataset::open(options_for(dir / "x_train.bin", dir.path(), w)); });
  EXPECT_NE(e.find("x_val.bin"), std::string::npos) << e;
}

TEST(TokenFiles, AnIdBeyondTheVocabularyIsRefusedAtItsOffset) {
  TempDir dir;
  std::vector<int64_t> ids = ramp(200, 7);
  for (int64_t& id : ids) id %= 1000;
  ids[137] = 4321;
  write_ids(dir / "train.bin", ids, 2);
  write_ids(dir / "val.bin", ids, 2);
  std::vector<std::string> w;
  const TokenDataset ds = TokenDataset::open(options_for(dir / "train.bin", dir.path(), w));
  // Validation windows of 16 cover token 137 in batch 137 / 16 / 2 = 4 (2 windows a batch).
  const ValidationBatches val(ds.validation(), 2, 16, 1000);
  for (int64_t b = 0; b < 4; ++b) EXPECT_NO_THROW(val.batch(b));
  const std::string e = error_of([&] { val.batch(4); });
  EXPECT_NE(e.find("val.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("token id 4321 at byte offset 274 (token 137"), std::string::npos) << e;
  EXPECT_NE(e.find("model.vocab_size = 1000"), std::string::npos) << e;
  // Unchecked (vocabulary 0) and large enough: no error.
  EXPECT_NO_THROW(ValidationBatches(ds.validation(), 2, 16, 0).batch(4));
  EXPECT_NO_THROW(ValidationBatches(ds.validation(), 2, 16, 5000).batch(4));
  // Train batches check too: every start, until one window holds the id.
  const TrainBatches train(ds.train(), 8, 16, 3, 1000);
  bool refused = false;
  for (uint64_t step = 0; step < 200 && !refused; ++step) {
    try {
      train.batch(step);
    } catch (const Error& err) {
      refused = std::string(err.what()).find("byte offset 274") != std::string::npos;
    }
  }
  EXPECT_TRUE(refused);
}

// Resident set size of this process, from /proc/self/statm.
int64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

TEST(TokenFiles, AGigabyteFileOpensWithoutEnteringMemory) {
  TempDir dir;
  const fs::path path = dir / "big_train.bin";
  { std::ofstream out(path, std::ios::binary); }
  fs::resize_file(path, int64_t{1} << 30);  // sparse: 2^29 zero ids, no disk used
  const int64_t before = rss_bytes();
  std::vector<std::string> w;
  const TokenDataset ds = TokenDataset::open(options_for(path, dir.path(), w, 0.01));
  EXPECT_EQ(ds.size(), int64_t{1} << 29);
  const TrainBatches batches(ds.train(), 8, 1024, 1, 50304);
  for (uint64_t step = 0; step < 4; ++step) batches.batch(step);
  // A few pages per window, not the file.
  EXPECT_LT(rss_bytes() - before, int64_t{64} << 20);
}

}  // namespace
}  // namespace mixprec::data
