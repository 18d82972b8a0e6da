// A token file or token cache truncated while a run reads it: the memory map it was read
// through killed the run with SIGBUS and no message; read by offset, the next batch is an error
// naming the file. Batches read by offset are the ids the bytes hold, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "data_testing.h"
#include "mixprec/core/error.h"
#include "mixprec/data/batches.h"
#include "support/op_testing.h"

namespace mixprec::data {
namespace {

using namespace testing;
using mixprec::testing::error_of;

// `n` uint16 ids 0, 7, 14, ... mod 50000, as nanoGPT writes them.
std::string uint16_ids(int64_t n) {
  std::string bytes;
  for (int64_t i = 0; i < n; ++i) {
    const auto v = static_cast<uint16_t>(i * 7 % 50000);
    bytes.append(reinterpret_cast<const char*>(&v), 2);
  }
  return bytes;
}

bool same(const Batch& a, const Batch& b) {
  const auto n = static_cast<std::size_t>(a.inputs.numel()) * sizeof(int64_t);
  return a.inputs.shape() == b.inputs.shape() &&
         std::memcmp(a.inputs.data<int64_t>(), b.inputs.data<int64_t>(), n) == 0 &&
         std::memcmp(a.targets.data<int64_t>(), b.targets.data<int64_t>(), n) == 0;
}

TEST(TokenFileTruncation, ABatchAfterTheFileIsCutShortIsAnErrorNamingIt) {
  TempDir dir;
  const fs::path path = dir / "train.bin";
  write_file(path, uint16_ids(100000));
  std::vector<std::string> w;
  const TokenDataset ds = TokenDataset::open(options_for(path, dir / "run", w, 0.1));
  const TrainBatches train(ds.train(), 8, 64, 1, 50304);
  const ValidationBatches val(ds.validation(), 8, 64, 50304);
  train.batch(0);
  val.batch(0);
  fs::resize_file(path, 1000);  // another process truncates it while this run reads it
  for (const std::string& e :
       {error_of([&] { train.batch(1); }), error_of([&] { val.batch(1); })}) {
    EXPECT_NE(e.find("[data " + path.string() + "]"), std::string::npos) << e;
    EXPECT_NE(e.find("1000 bytes now, 200000 when opened"), std::string::npos) << e;
  }
}

TEST(TokenFileTruncation, ATokenCacheCutShortIsAnErrorNamingIt) {
  TempDir dir;
  std::string text;
  for (int i = 0; text.size() < 200000; ++i) text += "line " + std::to_string(i) + "\n";
  write_file(dir / "corpus.txt", text);
  std::vector<std::string> w;
  const TokenDataset ds = TokenDataset::open(options_for(dir / "corpus.txt", dir / "run", w, 0.1));
  const TrainBatches train(ds.train(), 4, 128, 1, 256);
  train.batch(0);
  fs::resize_file(ds.cache_path(), 4096);
  const std::string e = error_of([&] {
    for (uint64_t step = 1; step < 50; ++step) train.batch(step);
  });
  EXPECT_NE(e.find("[data cache " + ds.cache_path().string() + "]"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated while being read"), std::string::npos) << e;
}

TEST(TokenFileTruncation, BatchesReadFromTheFileAreTheIdsItHoldsBitForBit) {
  TempDir dir;
  const fs::path path = dir / "train.bin";
  const std::string bytes = uint16_ids(300001);  // odd windows, blocks of 64 KiB crossed
  write_file(path, bytes);
  std::vector<std::string> w;
  const TokenDataset ds = TokenDataset::open(options_for(path, dir / "run", w, 0.0));
  const auto owner = std::make_shared<std::string>(bytes);
  const TokenSplit memory{
      owner, {reinterpret_cast<const uint8_t*>(owner->data()), 300001, 2}, "memory", "", 0};
  const TrainBatches from_file(ds.train(), 16, 1000, 5, 50304);
  const TrainBatches from_memory(memory, 16, 1000, 5, 50304);
  for (uint64_t step = 0; step < 20; ++step)
    EXPECT_TRUE(same(from_file.batch(step), from_memory.batch(step))) << step;
  const ValidationBatches val_file(ds.train(), 3, 40000, 50304);
  const ValidationBatches val_memory(memory, 3, 40000, 50304);
  for (int64_t i = 0; i < val_file.num_batches(); ++i)
    EXPECT_TRUE(same(val_file.batch(i), val_memory.batch(i))) << i;
}

}  // namespace
}  // namespace mixprec::data
