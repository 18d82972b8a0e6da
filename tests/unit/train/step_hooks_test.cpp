// TrainerOptions::on_step and on_eval (the Python module's progress callback): called once per
// step and per evaluation, in order, with the metrics run() logs; a throw ends the run.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "train_testing.h"

namespace mixprec::train {
namespace {

using testing::quiet;
using testing::TempDir;
using testing::tiny_config;

TEST(StepHooks, SeeEveryStepAndEvaluationInOrder) {
  TempDir dir;
  std::vector<int64_t> steps, evals;
  std::vector<double> losses;
  TrainerOptions o = quiet();
  o.on_step = [&](const StepMetrics& m) {
    steps.push_back(m.step);
    losses.push_back(m.loss);
  };
  o.on_eval = [&](const EvalMetrics& m) { evals.push_back(m.step); };
  Trainer trainer(tiny_config(dir, {"training.steps=8", "checkpoint.enable=false"}), o);
  const TrainSummary s = trainer.run();
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(evals, (std::vector<int64_t>{4, 8}));
  ASSERT_EQ(s.steps.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(losses[i], s.steps[i].loss);
}

TEST(StepHooks, AThrowEndsTheRun) {
  TempDir dir;
  int calls = 0;
  TrainerOptions o = quiet();
  o.on_step = [&](const StepMetrics& m) {
    ++calls;
    if (m.step == 3) throw std::runtime_error("stop here");
  };
  Trainer trainer(tiny_config(dir, {"training.steps=8", "checkpoint.enable=false"}), o);
  EXPECT_THROW(trainer.run(), std::runtime_error);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(trainer.next_step(), 3);
}

}  // namespace
}  // namespace mixprec::train
