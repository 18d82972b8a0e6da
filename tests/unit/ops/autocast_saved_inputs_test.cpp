// layernorm / rmsnorm and cross_entropy under bf16 autocast widen their bf16 inputs to f32;
// their backward keeps the bf16 original (the same values) instead of the f32 copy. Checked:
// outputs and every gradient have the bits of the same op on an explicit f32 cast (whose
// backward rounds dx once into bf16), and the graph holds fewer bytes.
#include <gtest/gtest.h>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops.h"
#include "mixprec/tensor/allocator.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using testing::randn;
using testing::same_bits;

struct Outcome {
  Tensor y, dx, dw, db;
  std::size_t graph_bytes = 0;  // live after the forward, beyond the inputs
};

// norm of x (bf16 leaf) with f32 weight and bias leaves: under autocast, or on an explicit
// f32 cast of x without it.
Outcome run_norm(bool layer, bool autocast) {
  Tensor x = randn({64, 96}, DType::bf16, 1, 2.0).set_requires_grad(true, DType::bf16);
  Tensor w = randn({96}, DType::f32, 2).set_requires_grad();
  Tensor b = randn({96}, DType::f32, 3).set_requires_grad();
  const Tensor probe = randn({64, 96}, DType::f32, 4);
  Outcome r;
  const std::size_t before = Allocator::instance().stats().current_bytes;
  {
    amp::AutocastGuard guard(DType::bf16, autocast);
    const Tensor xi = autocast ? x : x.to(DType::f32);
    r.y = layer ? layernorm(xi, w, b) : rmsnorm(xi, w);
  }
  r.graph_bytes = Allocator::instance().stats().current_bytes - before - r.y.nbytes();
  sum(mul(r.y, probe)).backward();
  r.dx = x.grad();
  r.dw = w.grad();
  if (layer) r.db = b.grad();
  return r;
}

TEST(AutocastSavedInputs, NormsKeepTheBf16InputWithTheSameBits) {
  for (bool layer : {true, false}) {
    const Outcome fused = run_norm(layer, true), cast = run_norm(layer, false);
    ASSERT_EQ(fused.y.dtype(), DType::f32);
    ASSERT_EQ(fused.dx.dtype(), DType::bf16);
    EXPECT_TRUE(same_bits(fused.y, cast.y)) << layer;
    EXPECT_TRUE(same_bits(fused.dx, cast.dx)) << layer;
    EXPECT_TRUE(same_bits(fused.dw, cast.dw)) << layer;
    if (layer) {
      EXPECT_TRUE(same_bits(fused.db, cast.db));
    }
    // The explicit cast's graph holds the f32 copy (64 x 96 x 4 bytes); autocast's holds the
    // bf16 input itself, which was live already.
    EXPECT_LE(fused.graph_bytes + 64 * 96 * 4, cast.graph_bytes) << layer;
  }
}

Outcome run_cross_entropy(bool autocast) {
  Tensor logits = randn({128, 40}, DType::bf16, 5, 3.0).set_requires_grad(true, DType::bf16);
  std::vector<int64_t> t;
  for (int64_t i = 0; i < 128; ++i) t.push_back((i * 7) % 40);
  const Tensor targets = Tensor::from_vector(t);
  Outcome r;
  const std::size_t before = Allocator::instance().stats().current_bytes;
  {
    amp::AutocastGuard guard(DType::bf16, autocast);
    r.y = cross_entropy(autocast ? logits : logits.to(DType::f32), targets);
  }
  r.graph_bytes = Allocator::instance().stats().current_bytes - before - r.y.nbytes();
  r.y.backward();
  r.dx = logits.grad();
  return r;
}

TEST(AutocastSavedInputs, CrossEntropyKeepsTheBf16LogitsWithTheSameBits) {
  const Outcome fused = run_cross_entropy(true), cast = run_cross_entropy(false);
  ASSERT_EQ(fused.y.dtype(), DType::f32);
  ASSERT_EQ(fused.dx.dtype(), DType::bf16);
  EXPECT_TRUE(same_bits(fused.y, cast.y));
  EXPECT_TRUE(same_bits(fused.dx, cast.dx));
  EXPECT_LE(fused.graph_bytes + 128 * 40 * 4, cast.graph_bytes);
}

TEST(AutocastSavedInputs, Bf16CrossEntropyWithoutAutocastStaysBf16) {
  // Not a widening: the kernel runs on bf16 logits and backward must not widen them.
  Tensor logits = randn({16, 8}, DType::bf16, 6).set_requires_grad(true, DType::bf16);
  const Tensor targets = Tensor::from_vector(std::vector<int64_t>(16, 3));
  Tensor loss = cross_entropy(logits, targets);
  loss.backward();
  EXPECT_EQ(logits.grad().dtype(), DType::bf16);
  // Row sums of softmax - onehot are 0 (to bf16 rounding of each element).
  const std::vector<double> g = logits.grad().to_doubles();
  for (int64_t r = 0; r < 16; ++r) {
    double s = 0;
    for (int64_t c = 0; c < 8; ++c) s += g[static_cast<size_t>(r * 8 + c)];
    EXPECT_NEAR(s, 0.0, 1e-3);
  }
}

}  // namespace
}  // namespace mixprec
