// The memory planner at W = 2 against the allocator's measured peak of a real 2-rank run
// (rank 0's peak_bytes over training steps 2..3; the ranks hold equal shares up to padding):
// within 10%, for the tiny and the default config, as the issue asks.
#include <gtest/gtest.h>

#include <cstdio>

#include "mixprec/dist/memory_plan.h"
#include "mixprec/io/config_file.h"
#include "mixprec/train/trainer.h"
#include "mpi_test_env.h"
#include "shared_dir.h"

namespace mixprec::dist {
namespace {

using mixprec::testing::SharedDir;
using mixprec::testing::world;

void expect_within_10_percent(const char* config_name, const char* precision,
                              const std::vector<std::string>& extra = {}) {
  SharedDir dir("memory");
  std::vector<std::string> overrides = {std::string("training.precision=") + precision,
                                        "training.mixed_precision_param=",
                                        "training.mixed_precision_reduce=",
                                        "run_dir=" + (dir.path() / "run").string(),
                                        "training.data=" + (dir.path() / "corpus.txt").string(),
                                        "training.steps=3",
                                        "training.threads=1",
                                        "training.eval_every=0",
                                        "checkpoint.enable=false",
                                        "checkpoint.export_bf16=false",
                                        "metrics.jsonl=false",
                                        "metrics.plot=false"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  config::TrainConfig c =
      config::load_config(std::string(MIXPREC_SOURCE_DIR) + "/configs/" + config_name, overrides);
  train::Trainer trainer(c, {.progress = train::ProgressStyle::quiet, .comm = &world()});
  const train::TrainSummary s = trainer.run();
  std::size_t measured = 0;
  for (std::size_t i = 1; i < s.steps.size(); ++i)
    measured = std::max(measured, s.steps[i].peak_bytes);
  const std::size_t predicted = plan_memory(c, world().size()).peak;
  const double ratio = static_cast<double>(predicted) / static_cast<double>(measured);
  if (world().rank() == 0)
    std::printf("%s %s W=%d: predicted %zu, measured %zu, ratio %.4f\n", config_name, precision,
                world().size(), predicted, measured, ratio);
  EXPECT_GT(ratio, 0.9);
  EXPECT_LT(ratio, 1.1);
}

TEST(MemoryPlanMpi, TinyWithin10PercentOfThePeak) {
  expect_within_10_percent("tiny.toml", "bf16-mixed");
}
TEST(MemoryPlanMpi, TinyFp32Within10PercentOfThePeak) {
  expect_within_10_percent("tiny.toml", "fp32");
}
TEST(MemoryPlanMpi, DefaultConfigWithin10PercentOfThePeak) {
  expect_within_10_percent("moe_small.toml", "bf16-mixed");
}

// Gradient accumulation, sharded: 2 micro-batches per rank, the reduced shards held between.
TEST(MemoryPlanMpi, AccumulationWithin10PercentOfThePeak) {
  expect_within_10_percent("moe_small.toml", "bf16-mixed", {"training.local_batch_size=4"});
}

}  // namespace
}  // namespace mixprec::dist
