// Learning-rate schedules: hand-computed rates for linear warm-up, cosine decay to a floor and
// the constant rate; apply() sets every group; bad configurations are rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "mixprec/optim/lr_schedule.h"
#include "mixprec/optim/sgd.h"
#include "optim_testing.h"

namespace mixprec::optim {
namespace {

TEST(LrSchedule, WarmupThenCosineToTheFloor) {
  const LrSchedule s({.lr = 1e-3, .warmup_steps = 10, .total_steps = 110, .min_lr = 1e-4});
  EXPECT_DOUBLE_EQ(s.lr(0), 1e-4);  // (0 + 1) / 10 of the peak
  EXPECT_DOUBLE_EQ(s.lr(4), 5e-4);
  EXPECT_DOUBLE_EQ(s.lr(9), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr(10), 1e-3);                                    // cosine starts at the peak
  EXPECT_DOUBLE_EQ(s.lr(35), 1e-4 + 9e-4 * (1 + std::sqrt(0.5)) / 2);  // a quarter of the way
  EXPECT_DOUBLE_EQ(s.lr(60), 5.5e-4);                                  // half way
  EXPECT_DOUBLE_EQ(s.lr(110), 1e-4);
  EXPECT_DOUBLE_EQ(s.lr(10000), 1e-4);
}

TEST(LrSchedule, ConstantAfterWarmup) {
  const LrSchedule s({.lr = 0.1, .warmup_steps = 4, .decay = LrDecay::constant});
  EXPECT_DOUBLE_EQ(s.lr(0), 0.025);
  EXPECT_DOUBLE_EQ(s.lr(3), 0.1);
  EXPECT_DOUBLE_EQ(s.lr(1000000), 0.1);
  const LrSchedule none({.lr = 0.1, .decay = LrDecay::constant});
  EXPECT_DOUBLE_EQ(none.lr(0), 0.1);
}

TEST(LrSchedule, ApplySetsEveryGroup) {
  const auto policy = testing::make_policy(DType::f32);
  auto a = std::make_shared<Parameter>("a", Tensor::zeros({1}), policy);
  auto b = std::make_shared<Parameter>("b", Tensor::zeros({1}), policy);
  SGD opt({ParamGroup{{a}, 1.0}, ParamGroup{{b}, 2.0}});
  LrSchedule({.lr = 0.5, .warmup_steps = 2, .decay = LrDecay::constant}).apply(opt, 0);
  EXPECT_EQ(opt.groups()[0].lr, 0.25);
  EXPECT_EQ(opt.groups()[1].lr, 0.25);
}

TEST(LrSchedule, RejectsBadConfigurations) {
  EXPECT_THROW(LrSchedule({.lr = 1e-3, .warmup_steps = 10, .total_steps = 10}), Error);
  EXPECT_THROW(LrSchedule({.lr = 1e-3, .total_steps = 10, .min_lr = 1e-2}), Error);
  EXPECT_THROW(LrSchedule({.lr = -1.0, .decay = LrDecay::constant}), Error);
  EXPECT_THROW(LrSchedule({.lr = 1.0, .decay = LrDecay::constant}).lr(-1), Error);
  EXPECT_EQ(parse_lr_decay("cosine"), LrDecay::cosine);
  EXPECT_EQ(parse_lr_decay("constant"), LrDecay::constant);
  EXPECT_THROW(parse_lr_decay("linear"), Error);
}

}  // namespace
}  // namespace mixprec::optim
