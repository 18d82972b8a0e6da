#include "mixprec/data/batches.h"

#include <gtest/gtest.h>

#include <cmath>

#include "data_testing.h"
#include "mixprec/data/byte_tokenizer.h"
#include "mixprec/numerics/philox.h"
#include "support/op_testing.h"

namespace mixprec::data {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::same_bits;
using mixprec::testing::with_threads;

// A split over an owned buffer: the batch code only needs tokens and a name.
TokenSplit split_of(const std::vector<uint8_t>& tokens, const std::string& name = "test split") {
  auto owner = std::make_shared<std::vector<uint8_t>>(tokens);
  return TokenSplit{owner, {owner->data(), static_cast<int64_t>(owner->size()), 1}, name, "", 0};
}

std::vector<uint8_t> ramp(std::size_t n) {
  std::vector<uint8_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<uint8_t>((i * 7 + i / 256) % 256);
  return t;
}

std::vector<int64_t> values(const Tensor& t) {
  const int64_t* p = t.data<int64_t>();
  return {p, p + t.numel()};
}

TEST(TrainBatches, InputsAreWindowsAndTargetsAreShiftedByOne) {
  const std::vector<uint8_t> tokens = ramp(5000);
  const TrainBatches batches(split_of(tokens), 4, 16, 1234);
  for (uint64_t step : {0ull, 1ull, 999ull}) {
    const Batch b = batches.batch(step);
    ASSERT_EQ(b.inputs.shape(), (Shape{4, 16}));
    ASSERT_EQ(b.targets.shape(), (Shape{4, 16}));
    ASSERT_EQ(b.inputs.dtype(), DType::i64);
    ASSERT_EQ(b.targets.dtype(), DType::i64);
    const std::vector<int64_t> in = values(b.inputs), out = values(b.targets);
    for (int64_t r = 0; r < 4; ++r) {
      const int64_t start = batches.window_start(step, r);
      ASSERT_GE(start, 0);
      ASSERT_LE(start + 16, static_cast<int64_t>(tokens.size()) - 1);
      for (int64_t t = 0; t < 16; ++t) {
        EXPECT_EQ(in[r * 16 + t], tokens[start + t]);
        EXPECT_EQ(out[r * 16 + t], tokens[start + t + 1]);
        if (t + 1 < 16) {
          EXPECT_EQ(out[r * 16 + t], in[r * 16 + t + 1]);
        }
      }
    }
  }
}

// The documented draw, recomputed here: it is the resume contract, so it must not drift.
TEST(TrainBatches, WindowStartsFollowTheDocumentedPhiloxDraw) {
  const std::vector<uint8_t> tokens = ramp(100'003);
  const TrainBatches batches(split_of(tokens), 8, 64, 0xC0FFEE);
  const uint64_t starts = 100'003 - 64;
  EXPECT_EQ(batches.num_starts(), static_cast<int64_t>(starts));
  for (uint64_t step = 0; step < 50; ++step) {
    for (int64_t row = 0; row < 8; ++row) {
      const PhiloxBlock r = philox4x32_10(
          {static_cast<uint32_t>(row), 0, static_cast<uint32_t>(step), 0}, {0xC0FFEE, 0});
      const long double u = (static_cast<long double>(r[1]) * 4294967296.0L + r[0]) /
                            18446744073709551616.0L;  // in [0, 1)
      EXPECT_EQ(batches.window_start(step, row),
                static_cast<int64_t>(std::floor(u * static_cast<long double>(starts))))
          << "step " << step << " row " << row;
    }
  }
}

TEST(TrainBatches, StartsAreUniformOverTheSplit) {
  const std::vector<uint8_t> tokens = ramp(1000 + 10);
  const TrainBatches batches(split_of(tokens), 10, 10, 5);  // 1000 possible starts
  std::vector<int64_t> counts(10, 0);
  for (uint64_t step = 0; step < 10'000; ++step) {
    for (int64_t row = 0; row < 10; ++row) ++counts[batches.window_start(step, row) / 100];
  }
  double chi2 = 0;  // 9 degrees of freedom: 99.9% quantile 27.9
  for (int64_t c : counts) chi2 += (c - 10'000.0) * (c - 10'000.0) / 10'000.0;
  EXPECT_LT(chi2, 27.9);
}

TEST(TrainBatches, SameSeedAndStepGiveTheSameBatch) {
  const std::vector<uint8_t> tokens = ramp(20'000);
  const TrainBatches a(split_of(tokens), 6, 32, 42);
  const TrainBatches b(split_of(tokens), 6, 32, 42);  // a fresh object: nothing but (seed, step)
  const TrainBatches other_seed(split_of(tokens), 6, 32, 43);
  for (uint64_t step = 0; step < 20; ++step) {
    EXPECT_TRUE(same_bits(a.batch(step).inputs, b.batch(step).inputs));
    EXPECT_TRUE(same_bits(a.batch(step).targets, b.batch(step).targets));
    EXPECT_FALSE(same_bits(a.batch(step).inputs, a.batch(step + 1).inputs));
    EXPECT_FALSE(same_bits(a.batch(step).inputs, other_seed.batch(step).inputs));
  }
  // Rows of one batch are drawn independently too.
  EXPECT_NE(a.window_start(0, 0), a.window_start(0, 1));
}

TEST(TrainBatches, ResumingAtAStepReplaysTheUninterruptedRun) {
  const std::vector<uint8_t> tokens = ramp(20'000);
  const TrainBatches run(split_of(tokens), 4, 32, 9);
  std::vector<Batch> uninterrupted;
  for (uint64_t step = 0; step < 12; ++step) uninterrupted.push_back(run.batch(step));
  const TrainBatches resumed(split_of(tokens), 4, 32, 9);  // "restarted" at step 7
  for (uint64_t step = 7; step < 12; ++step) {
    EXPECT_TRUE(same_bits(resumed.batch(step).inputs, uninterrupted[step].inputs));
  }
}

TEST(TrainBatches, BitsDoNotDependOnThreads) {
  const std::vector<uint8_t> tokens = ramp(20'000);
  const TrainBatches batches(split_of(tokens), 8, 64, 3);
  const Tensor one = with_threads(1, [&] { return batches.batch(5).inputs; });
  const Tensor two = with_threads(2, [&] { return batches.batch(5).inputs; });
  EXPECT_TRUE(same_bits(one, two));
}

TEST(TrainBatches, RankShardsConcatenateToTheGlobalBatch) {
  const std::vector<uint8_t> tokens = ramp(20'000);
  const TrainBatches batches(split_of(tokens), 8, 24, 77);
  for (uint64_t step : {0ull, 3ull, 12345ull}) {
    const Batch global = batches.batch(step);
    for (int64_t world : {2, 4, 8}) {
      std::vector<int64_t> in, out;
      for (int64_t rank = 0; rank < world; ++rank) {
        const Batch shard = batches.batch(step, rank, world);
        ASSERT_EQ(shard.inputs.shape(), (Shape{8 / world, 24}));
        const std::vector<int64_t> i = values(shard.inputs), o = values(shard.targets);
        in.insert(in.end(), i.begin(), i.end());
        out.insert(out.end(), o.begin(), o.end());
      }
      EXPECT_EQ(in, values(global.inputs)) << "world " << world;
      EXPECT_EQ(out, values(global.targets)) << "world " << world;
    }
  }
}

TEST(TrainBatches, RankRowsAndBadShapesAreChecked) {
  EXPECT_EQ(rank_rows(8, 1, 2).begin, 4);
  EXPECT_EQ(rank_rows(8, 1, 2).end, 8);
  EXPECT_EQ(rank_rows(6, 2, 3).begin, 4);
  EXPECT_NE(error_of([] { rank_rows(6, 0, 4); }).find("not divisible by world size 4"),
            std::string::npos);
  EXPECT_NE(error_of([] { rank_rows(8, 2, 2); }).find("rank 2"), std::string::npos);
  EXPECT_NE(error_of([] { rank_rows(8, 0, 0); }).find("world size 0"), std::string::npos);
  const std::vector<uint8_t> tokens = ramp(100);
  EXPECT_NE(error_of([&] { TrainBatches(split_of(tokens), 0, 8, 1); }).find("batch size 0"),
            std::string::npos);
}

TEST(TrainBatches, SequenceLongerThanTheSplitNamesIt) {
  const std::vector<uint8_t> tokens = ramp(100);
  const std::string name = "train split of /some/run/tokens-00.bin";
  // 99 + 1 tokens fit exactly: one possible start.
  const TrainBatches tight(split_of(tokens, name), 2, 99, 1);
  EXPECT_EQ(tight.num_starts(), 1);
  EXPECT_EQ(tight.window_start(17, 1), 0);
  const std::string e = error_of([&] { TrainBatches(split_of(tokens, name), 2, 100, 1); });
  EXPECT_NE(e.find(name), std::string::npos) << e;
  EXPECT_NE(e.find("sequence length 100 needs 101 tokens"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { ValidationBatches(split_of({}, name), 2, 4); }).find(name),
            std::string::npos);
}

TEST(ValidationBatches, AreFixedContiguousWindows) {
  const std::vector<uint8_t> tokens = ramp(103);  // (103 - 1) / 10 = 10 windows
  const ValidationBatches val(split_of(tokens), 4, 10);
  EXPECT_EQ(val.num_windows(), 10);
  EXPECT_EQ(val.num_batches(), 3);
  int64_t window = 0;
  for (int64_t j = 0; j < val.num_batches(); ++j) {
    const Batch b = val.batch(j);
    const int64_t rows = j < 2 ? 4 : 2;  // the last batch holds the remaining 2 windows
    ASSERT_EQ(b.inputs.shape(), (Shape{rows, 10}));
    const std::vector<int64_t> in = values(b.inputs), out = values(b.targets);
    for (int64_t r = 0; r < rows; ++r, ++window) {
      for (int64_t t = 0; t < 10; ++t) {
        EXPECT_EQ(in[r * 10 + t], tokens[window * 10 + t]);
        EXPECT_EQ(out[r * 10 + t], tokens[window * 10 + t + 1]);
      }
    }
    EXPECT_TRUE(same_bits(b.inputs, ValidationBatches(split_of(tokens), 4, 10).batch(j).inputs));
  }
  EXPECT_EQ(window, 10);
  EXPECT_NE(error_of([&] { val.batch(3); }).find("validation batch 3"), std::string::npos);
}

TEST(Batches, EndToEndFromADatasetOnDisk) {
  testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "line " + std::to_string(i) + " of the corpus\n";
  testing::write_file(dir / "corpus/lines.txt", text);
  std::vector<std::string> warnings;
  const TokenDataset ds =
      TokenDataset::open(testing::options_for(dir / "corpus", dir / "run", warnings, 0.2));
  const TrainBatches train(ds.train(), 4, 32, 1);
  const ValidationBatches val(ds.validation(), 4, 32);
  const Batch b = train.batch(0);
  const std::string row0 = ByteTokenizer().decode(b.inputs.select(0, 0).contiguous());
  EXPECT_NE(text.find(row0), std::string::npos);
  const int64_t train_end = ds.train().size();
  EXPECT_EQ(values(val.batch(0).inputs)[0],
            static_cast<unsigned char>(text[static_cast<std::size_t>(train_end)]));
  const std::string e = error_of([&] { TrainBatches(ds.validation(), 1, 100'000, 1); });
  EXPECT_NE(e.find("validation split of " + ds.cache_path().string()), std::string::npos) << e;
}

}  // namespace
}  // namespace mixprec::data
