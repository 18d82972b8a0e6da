// Exact resume: a run stopped after a checkpoint and resumed gives the per-step losses of an
// uninterrupted run, bit for bit, whatever the precision policy.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "mixprec/io/checkpoint_store.h"
#include "mixprec/train/trainer.h"
#include "train_testing.h"

namespace mixprec::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::tiny_config;

struct StepBits {
  int64_t step;
  double loss, grad_norm;
  float scale;
  bool operator==(const StepBits& o) const {
    return step == o.step && std::memcmp(&loss, &o.loss, sizeof loss) == 0 &&
           std::memcmp(&grad_norm, &o.grad_norm, sizeof grad_norm) == 0 && scale == o.scale;
  }
};

std::vector<StepBits> bits(const TrainSummary& s) {
  std::vector<StepBits> out;
  for (const StepMetrics& m : s.steps) out.push_back({m.step, m.loss, m.grad_norm, m.loss_scale});
  return out;
}

std::vector<StepBits> tail(const std::vector<StepBits>& v, int64_t from_step) {
  std::vector<StepBits> out;
  for (const StepBits& b : v)
    if (b.step > from_step) out.push_back(b);
  return out;
}

TrainerOptions quiet(int64_t stop_at = -1, bool resume = false) {
  TrainerOptions o;
  o.progress = ProgressStyle::quiet;
  o.stop_at_step = stop_at;
  o.resume = resume;
  return o;
}

class ResumeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ResumeTest, StoppedAndResumedRunRepeatsTheUninterruptedOne) {
  const std::string precision = std::string("training.precision=") + GetParam();
  TempDir a, b;
  const std::vector<StepBits> whole = bits(Trainer(tiny_config(a, {precision}), quiet()).run());
  ASSERT_EQ(whole.size(), 12u);

  // Interrupted after step 6: the newest checkpoint is step 4; steps 5, 6 are redone.
  const TrainSummary first = Trainer(tiny_config(b, {precision}), quiet(6)).run();
  EXPECT_EQ(first.end_step, 6);
  EXPECT_EQ(bits(first), std::vector<StepBits>(whole.begin(), whole.begin() + 6));
  const TrainSummary resumed = Trainer(tiny_config(b, {precision}), quiet(-1, true)).run();
  EXPECT_EQ(resumed.start_step, 4);
  EXPECT_EQ(bits(resumed), tail(whole, 4));
}

INSTANTIATE_TEST_SUITE_P(Policies, ResumeTest,
                         ::testing::Values("fp32", "bf16-mixed", "fp16-mixed", "bf16-pure",
                                           "te_delayed", "te_nvfp4"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// Auxiliary-loss-free balancing: the expert biases are part of the state a resume restores
// (without them the resumed steps route differently), and they moved during the run.
TEST(Resume, ExpertBiasesAreCheckpointedAndResumeBitExact) {
  const std::vector<std::string> o = {
      "model.moe.load_balance_coeff=0.01", "model.moe.n_shared_experts=1",
      "model.moe.score_func=sigmoid", "model.moe.aux_loss_weight=0"};
  TempDir a, b, c;
  const TrainSummary run = Trainer(tiny_config(a, o), quiet()).run();
  const std::vector<StepBits> whole = bits(run);
  ASSERT_FALSE(run.steps.back().expert_load.empty());
  EXPECT_EQ(run.steps.back().expert_load.size(), 2u);  // 2 MoE blocks
  std::vector<std::string> off = o;
  off[0] = "model.moe.load_balance_coeff=0";
  EXPECT_NE(tail(bits(Trainer(tiny_config(c, off), quiet()).run()), 2), tail(whole, 2));

  Trainer(tiny_config(b, o), quiet(6)).run();
  const io::Checkpoint saved =
      io::load_checkpoint((b / "run/checkpoint/step-00000004.safetensors").string());
  const Tensor& bias = saved.tensors.at("buffer.blocks.0.moe.expert_bias");
  EXPECT_NE(bias.to_doubles(), std::vector<double>(4, 0.0));
  const TrainSummary resumed = Trainer(tiny_config(b, o), quiet(-1, true)).run();
  EXPECT_EQ(bits(resumed), tail(whole, 4));
}

TEST(Resume, ATornNewestCheckpointFallsBackToThePreviousOneAndStillMatches) {
  TempDir a, b;
  const std::vector<StepBits> whole = bits(Trainer(tiny_config(a), quiet()).run());
  Trainer(tiny_config(b), quiet(9)).run();  // checkpoints 4 and 8
  const fs::path newest = b / "run/checkpoint/step-00000008.safetensors";
  ASSERT_TRUE(fs::exists(newest));
  fs::resize_file(newest, fs::file_size(newest) / 2);  // killed mid-copy, say
  const TrainSummary resumed = Trainer(tiny_config(b), quiet(-1, true)).run();
  EXPECT_EQ(resumed.start_step, 4);
  EXPECT_EQ(bits(resumed), tail(whole, 4));
}

TEST(Resume, SeedsBeyondDoublePrecisionResume) {
  // 2^53 + 1 is not a double: the checkpoint's seed must be read back as the exact integer.
  TempDir a;
  const std::string seed = "training.seed=9007199254740993";
  Trainer(tiny_config(a, {seed}), quiet(6)).run();
  const TrainSummary resumed = Trainer(tiny_config(a, {seed}), quiet(-1, true)).run();
  EXPECT_EQ(resumed.start_step, 4);
  EXPECT_EQ(resumed.end_step, 12);
}

// step() is run()'s step: stepping by hand, then letting run() finish, repeats a whole run.
TEST(TrainerStep, StepsTakenByHandThenRunRepeatTheWholeRun) {
  TempDir a, b;
  const std::vector<StepBits> whole = bits(Trainer(tiny_config(a), quiet()).run());
  Trainer trainer(tiny_config(b), quiet());
  std::vector<StepBits> by_hand;
  for (int i = 0; i < 5; ++i) {
    const StepMetrics m = trainer.step();
    by_hand.push_back({m.step, m.loss, m.grad_norm, m.loss_scale});
  }
  EXPECT_EQ(trainer.next_step(), 5);
  EXPECT_EQ(by_hand, std::vector<StepBits>(whole.begin(), whole.begin() + 5));
  const TrainSummary rest = trainer.run();
  EXPECT_EQ(rest.start_step, 5);
  EXPECT_EQ(bits(rest), tail(whole, 5));
}

TEST(Resume, ResumeWithoutACheckpointStartsAtStepZero) {
  TempDir a;
  const TrainSummary s = Trainer(tiny_config(a, {"training.steps=3"}), quiet(-1, true)).run();
  EXPECT_EQ(s.start_step, 0);
  EXPECT_EQ(s.end_step, 3);
}

}  // namespace
}  // namespace mixprec::train
