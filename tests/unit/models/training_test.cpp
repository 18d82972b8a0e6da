// A tiny gpt and a tiny moe learn a repeating token pattern with AdamW: the loss falls from
// ln(vocab) to well below it.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/amp/autocast.h"
#include "mixprec/models/transformer/transformer.h"
#include "mixprec/optim/adamw.h"
#include "models_testing.h"

namespace mixprec::models {
namespace {

// Rows of the cycle 0, 1, ..., period-1 starting at different phases; targets are the next
// token, so a model that learns the cycle predicts every position.
std::pair<Tensor, Tensor> pattern_batch(int64_t step, int64_t B, int64_t T, int64_t period) {
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t phase = (step * 5 + b * 3) % period;
    for (int64_t t = 0; t < T; ++t) {
      x.push_back((phase + t) % period);
      y.push_back((phase + t + 1) % period);
    }
  }
  return {Tensor::from_vector(x, {B, T}), Tensor::from_vector(y, {B, T})};
}

struct Curve {
  double first = 0, last = 0;
};

Curve train(const char* kind, const char* precision) {
  config::ModelConfig c = testing::tiny_config(kind);
  c.moe.capacity_factor = 1.5;
  Transformer model = testing::transformer(c);
  const amp::MixedPrecisionPolicy policy = amp::preset(precision);
  model.materialize(1234, policy);
  optim::AdamW opt(model.parameters().parameters(), 1e-2, 0.01);
  Curve curve;
  for (int64_t step = 0; step < 100; ++step) {
    const auto [x, y] = pattern_batch(step, 4, 12, 7);
    amp::AutocastGuard guard(policy.compute_dtype == DType::f32 ? DType::f32
                                                                : policy.compute_dtype);
    const LossParts loss = model.loss(x, y);
    loss.total.backward();
    opt.step();
    opt.zero_grad();
    if (step == 0) curve.first = loss.ce.item();
    curve.last = loss.ce.item();
  }
  return curve;
}

TEST(Training, TinyGptLearnsARepeatingPattern) {
  const double ln_v = std::log(16.0);
  for (const char* precision : {"fp32", "bf16-mixed"}) {
    const Curve c = train("gpt", precision);
    EXPECT_NEAR(c.first, ln_v, 0.1) << precision;
    EXPECT_LT(c.last, 0.1 * ln_v) << precision;
  }
}

TEST(Training, TinyMoeLearnsARepeatingPattern) {
  const double ln_v = std::log(16.0);
  for (const char* precision : {"fp32", "bf16-mixed"}) {
    const Curve c = train("moe", precision);
    EXPECT_NEAR(c.first, ln_v, 0.1) << precision;
    EXPECT_LT(c.last, 0.1 * ln_v) << precision;
  }
}

}  // namespace
}  // namespace mixprec::models
