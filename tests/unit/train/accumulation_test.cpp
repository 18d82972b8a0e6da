// Gradient accumulation (training.local_batch_size, torchtitan's): a step of 8 rows run as
// 4 micro-batches of 2 follows the 8-row step. In fp32 the two differ only in how each weight
// gradient's sum over the rows is grouped (four partial sums of 2 rows added in turn, vs one
// pass over 8), a few f32 roundings per element that Adam carries forward: losses agree to
// 1e-5 relative over 12 steps (measured ~1e-7), as the 2-rank runs do for the same reason.
// Under fp16 loss scaling the step has one scale, one unscale and one found-inf decision: the
// scale and skip history is the 8-row run's.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/dist/memory_plan.h"
#include "mixprec/train/trainer.h"
#include "train_testing.h"

namespace mixprec::train {
namespace {

using testing::quiet;
using testing::TempDir;
using testing::tiny_config;

TrainSummary run(const TempDir& dir, std::vector<std::string> overrides) {
  overrides.push_back("training.batch_size=8");
  overrides.push_back("model.moe.aux_loss_weight=0");  // per micro-batch: another objective
  return Trainer(tiny_config(dir, overrides), quiet()).run();
}

double worst_relative(const TrainSummary& a, const TrainSummary& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.steps.size(); ++i)
    worst = std::max(worst, std::abs(a.steps[i].loss - b.steps[i].loss) / a.steps[i].loss);
  return worst;
}

TEST(GradientAccumulation, FourMicroBatchesOfTwoFollowEightRows) {
  for (const char* kind : {"gpt", "moe"}) {
    TempDir a, b;
    const std::string k = std::string("model.kind=") + kind;
    const TrainSummary whole = run(a, {k, "training.precision=fp32"});
    const TrainSummary micro =
        run(b, {k, "training.precision=fp32", "training.local_batch_size=2"});
    ASSERT_EQ(whole.steps.size(), micro.steps.size());
    EXPECT_LT(worst_relative(whole, micro), 1e-5) << kind;
    for (std::size_t i = 0; i < whole.steps.size(); ++i)
      EXPECT_NEAR(whole.steps[i].grad_norm, micro.steps[i].grad_norm,
                  1e-4 * whole.steps[i].grad_norm)
          << kind << " step " << whole.steps[i].step;
    ASSERT_EQ(whole.evals.size(), micro.evals.size());
    for (std::size_t i = 0; i < whole.evals.size(); ++i)
      EXPECT_NEAR(whole.evals[i].val_loss, micro.evals[i].val_loss, 1e-5 * whole.evals[i].val_loss);
  }
}

// The mean of the micro-batches' gradients, not their sum: a run that summed them would take
// steps 4x too large (clipping at 1.0 hides some of it, so compare the first step's norm).
TEST(GradientAccumulation, TheStepGradientIsTheMeanOverRows) {
  TempDir a, b;
  const TrainSummary whole = run(a, {"training.precision=fp32", "training.steps=1"});
  const TrainSummary micro =
      run(b, {"training.precision=fp32", "training.steps=1", "training.local_batch_size=2"});
  EXPECT_NEAR(micro.steps[0].grad_norm, whole.steps[0].grad_norm, 1e-5 * whole.steps[0].grad_norm);
  EXPECT_NEAR(micro.steps[0].loss, whole.steps[0].loss, 1e-6 * whole.steps[0].loss);
}

TEST(GradientAccumulation, OneLossScaleDecisionPerStepUnderFp16) {
  TempDir a, b;
  const TrainSummary whole = run(a, {"training.precision=fp16-mixed"});
  const TrainSummary micro =
      run(b, {"training.precision=fp16-mixed", "training.local_batch_size=2"});
  ASSERT_EQ(whole.steps.size(), micro.steps.size());
  for (std::size_t i = 0; i < whole.steps.size(); ++i) {
    EXPECT_EQ(whole.steps[i].loss_scale, micro.steps[i].loss_scale) << "step " << i + 1;
    EXPECT_EQ(whole.steps[i].skipped, micro.steps[i].skipped) << "step " << i + 1;
    EXPECT_EQ(whole.steps[i].skipped_total, micro.steps[i].skipped_total);
  }
  EXPECT_LT(worst_relative(whole, micro), 2e-3);  // fp16 weights: a rounding flips now and then
}

// The memory planner counts one micro-batch's activations.
TEST(GradientAccumulation, ThePlannerCountsOneMicroBatch) {
  TempDir a;
  config::TrainConfig eight = tiny_config(a, {"training.batch_size=8"});
  config::TrainConfig two = eight;
  two.training.batch_size = 2;
  config::TrainConfig micro = eight;
  micro.training.local_batch_size = 2;
  EXPECT_EQ(dist::plan_memory(micro, 1).activations, dist::plan_memory(two, 1).activations);
  EXPECT_LT(dist::plan_memory(micro, 1).activations, dist::plan_memory(eight, 1).activations);
  micro.training.local_batch_size = 3;
  EXPECT_THROW(dist::plan_memory(micro, 1), Error);  // 3 does not divide 8
}

}  // namespace
}  // namespace mixprec::train
