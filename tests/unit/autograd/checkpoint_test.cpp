// Activation checkpointing (autograd/checkpoint.h): a checkpointed function's gradients are
// the plain function's, bit for bit and against finite differences; the recompute runs under
// the forward's autocast state although backward runs outside it; selective checkpointing
// hands the kept op outputs back instead of recomputing them.
#include "mixprec/autograd/checkpoint.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/compute_scope.h"
#include "mixprec/autograd/anomaly.h"
#include "mixprec/autograd/function.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using testing::error_of;
using testing::grad_input;
using testing::randn;
using testing::same_bits;

// x [4, 6] -> two layers with a LayerNorm, GELU, seeded dropout and a residual: the ops a
// transformer block is made of.
struct Weights {
  Tensor w1, b1, g, beta, w2;
  static Weights make(DType dtype, uint64_t seed) {
    Weights w{randn({8, 6}, dtype, seed, 0.5), randn({8}, dtype, seed + 1, 0.1),
              randn({8}, dtype, seed + 2, 1.0), randn({8}, dtype, seed + 3, 0.1),
              randn({6, 8}, dtype, seed + 4, 0.5)};
    for (Tensor* t : w.all())
      t->set_requires_grad(true, dtype == DType::f64 ? DType::f64 : DType::f32);
    return w;
  }
  std::vector<Tensor*> all() { return {&w1, &b1, &g, &beta, &w2}; }
  void clear_grads() {
    for (Tensor* t : all()) t->set_grad(Tensor());
  }
};

Tensor block(const Tensor& x, const Weights& w) {
  const Tensor h = gelu(layernorm(linear(x, w.w1, w.b1), w.g, w.beta));
  return add(x, linear(dropout(h, 0.25, /*seed=*/42), w.w2));
}

CheckpointFn block_fn(const Weights& w) {
  return [&w](const std::vector<Tensor>& in) { return std::vector<Tensor>{block(in[0], w)}; };
}

TEST(Checkpoint, GradcheckF64) {
  Weights w = Weights::make(DType::f64, 11);
  const Tensor x = grad_input({4, 6}, 3);
  std::vector<Tensor> inputs{x, w.w1, w.b1, w.g, w.beta, w.w2};
  testing::expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        const Weights v{in[1], in[2], in[3], in[4], in[5]};
        return checkpoint([v](const std::vector<Tensor>& a) { return std::vector{block(a[0], v)}; },
                          {in[0]})[0];
      },
      inputs, "checkpointed block");
}

// One forward + backward of block(x) (checkpointed or not); the gradients of x and the weights.
std::vector<Tensor> gradients(Weights& w, const Tensor& x_in, const CheckpointOptions* options) {
  w.clear_grads();
  Tensor x = x_in.detach();
  x.set_requires_grad(true);
  const Tensor y = options ? checkpoint(block_fn(w), {x}, *options)[0] : block(x, w);
  sum(mul(y, y)).backward();
  std::vector<Tensor> g{x.grad()};
  for (Tensor* t : w.all()) g.push_back(t->grad());
  return g;
}

void expect_same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].defined() && b[i].defined()) << "gradient " << i;
    EXPECT_TRUE(same_bits(a[i], b[i]))
        << "gradient " << i << " differs by " << testing::max_abs_diff(a[i], b[i]);
  }
}

TEST(Checkpoint, GradientsAreThePlainOnesBitForBit) {
  Weights w = Weights::make(DType::f32, 5);
  const Tensor x = randn({4, 6}, DType::f32, 9);
  const std::vector<Tensor> plain = gradients(w, x, nullptr);
  const CheckpointOptions full, selective{.save = save_attention_and_every_other_matmul};
  expect_same_bits(gradients(w, x, &full), plain);
  expect_same_bits(gradients(w, x, &selective), plain);
}

// The recompute runs in backward, outside the AutocastGuard the forward ran in: the
// checkpoint re-enters the forward's autocast state (bf16 products, an fp32 module override),
// else the weight gradients would come from f32 products.
TEST(Checkpoint, RecomputeRunsUnderTheForwardsAutocastState) {
  Weights w = Weights::make(DType::f32, 21);
  const Tensor x = randn({4, 6}, DType::f32, 2);
  auto run = [&](bool checkpointed) {
    w.clear_grads();
    Tensor xi = x.detach();
    xi.set_requires_grad(true);
    Tensor loss;
    {
      amp::AutocastGuard autocast(DType::bf16, {.fp32_modules = {"outer.second"}});
      amp::ModuleScope outer("outer");
      auto fn = [&w](const std::vector<Tensor>& in) {
        const Tensor h = gelu(linear(in[0], w.w1, w.b1));
        amp::ModuleScope second("second");  // "outer.second": f32 by the override
        return std::vector<Tensor>{linear(h, w.w2)};
      };
      const Tensor y = checkpointed ? checkpoint(fn, {xi})[0] : fn({xi})[0];
      loss = sum(mul(y, y));
    }
    EXPECT_FALSE(amp::autocast_enabled());
    loss.backward();
    EXPECT_FALSE(amp::autocast_enabled());  // the recompute left no state behind
    EXPECT_EQ(amp::module_path(), "");
    return std::vector<Tensor>{loss, xi.grad(), w.w1.grad(), w.b1.grad(), w.w2.grad()};
  };
  expect_same_bits(run(true), run(false));
}

TEST(Checkpoint, SeveralOutputsAndInputs) {
  Weights w = Weights::make(DType::f32, 8);
  const Tensor a = randn({4, 6}, DType::f32, 1), b = randn({4, 6}, DType::f32, 2);
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3});
  auto fn = [&w](const std::vector<Tensor>& in) {
    const Tensor y = block(add(in[0], in[1]), w);
    return std::vector<Tensor>{y, sum(mul(in[1], y)), in[2]};
  };
  auto run = [&](bool checkpointed) {
    w.clear_grads();
    Tensor x = a.detach(), z = b.detach();
    x.set_requires_grad(true);
    z.set_requires_grad(true);
    const std::vector<Tensor> out = checkpointed ? checkpoint(fn, {x, z, ids}) : fn({x, z, ids});
    EXPECT_EQ(out[2].dtype(), DType::i64);
    EXPECT_FALSE(out[2].requires_grad());
    add(sum(out[0]), scale(out[1], 3.0)).backward();
    return std::vector<Tensor>{x.grad(), z.grad(), w.w1.grad(), w.w2.grad()};
  };
  expect_same_bits(run(true), run(false));
}

// The input needs no gradient, the weights do: the outputs still lead back to the recompute.
TEST(Checkpoint, WeightsGetGradientsWhenTheInputNeedsNone) {
  Weights w = Weights::make(DType::f32, 3);
  const Tensor x = randn({4, 6}, DType::f32, 4);
  const Tensor y = checkpoint(block_fn(w), {x})[0];
  ASSERT_TRUE(y.requires_grad());
  sum(y).backward();
  for (Tensor* t : w.all()) EXPECT_TRUE(t->grad().defined());
}

TEST(Checkpoint, WithoutGradModeItIsTheFunction) {
  Weights w = Weights::make(DType::f32, 3);
  const Tensor x = randn({4, 6}, DType::f32, 4);
  NoGradGuard no_grad;
  int calls = 0;
  const Tensor y = checkpoint(
      [&](const std::vector<Tensor>& in) {
        ++calls;
        return std::vector<Tensor>{block(in[0], w)};
      },
      {x})[0];
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(same_bits(y, block(x, w)));
}

// The forward keeps nothing of the function: after it only the input and output are live;
// the recompute runs once per backward, and knows it is one.
TEST(Checkpoint, ForwardKeepsOnlyTheInputAndRecomputesOnce) {
  Weights w = Weights::make(DType::f32, 3);
  Tensor x = randn({4, 6}, DType::f32, 4);
  x.set_requires_grad(true);
  int calls = 0, recomputes = 0;
  const Tensor y = checkpoint(
      [&](const std::vector<Tensor>& in) {
        ++calls;
        if (checkpoint_recomputing()) ++recomputes;
        EXPECT_EQ(GradMode::is_enabled(), checkpoint_recomputing());
        return std::vector<Tensor>{block(in[0], w)};
      },
      {x})[0];
  EXPECT_FALSE(checkpoint_recomputing());
  EXPECT_EQ(y.grad_fn()->name(), std::string("CheckpointBackward"));
  EXPECT_EQ(y.grad_fn()->next_edges().size(), 1u);
  EXPECT_EQ(calls, 1);
  sum(y).backward();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(recomputes, 1);
  EXPECT_FALSE(checkpoint_recomputing());
  EXPECT_TRUE(x.grad().defined());
}

// A backward that keeps the graph may run again: the node recomputes again.
TEST(Checkpoint, RetainedGraphRecomputesAgain) {
  Weights w = Weights::make(DType::f32, 3);
  Tensor x = randn({4, 6}, DType::f32, 4);
  x.set_requires_grad(true);
  const Tensor loss = sum(checkpoint(block_fn(w), {x})[0]);
  loss.backward({}, /*retain_graph=*/true);
  const Tensor once = x.grad().clone();
  loss.backward();
  EXPECT_TRUE(same_bits(x.grad(), scale(once, 2.0)));
}

// Leaves the recompute read keep their gradient accumulators as long as the checkpoint's node
// lives, as in a graph never checkpointed (the sharded runtime's "was this weight used?").
TEST(Checkpoint, WeightAccumulatorsLiveAsLongAsTheGraph) {
  Weights w = Weights::make(DType::f32, 3);
  Tensor x = randn({4, 6}, DType::f32, 4);
  x.set_requires_grad(true);
  Tensor loss = sum(checkpoint(block_fn(w), {x})[0]);
  loss.backward();
  EXPECT_FALSE(w.w1.autograd_meta()->grad_accumulator.expired());
  loss = Tensor();
  EXPECT_TRUE(w.w1.autograd_meta()->grad_accumulator.expired());
}

// Selective checkpointing: the recompute takes the kept outputs (here the first linear's)
// instead of computing them. Changing that linear's weight between forward and backward shows
// which: the second weight's gradient then comes from the forward's product (kept) with
// selective, from the new one (recomputed) with full.
TEST(Checkpoint, SelectiveRecomputeReusesTheKeptOutputs) {
  const Tensor x = randn({4, 6}, DType::f32, 4);
  auto w2_grad = [&](SavePolicy save, bool change_w1) {
    Weights w = Weights::make(DType::f32, 3);
    const Tensor y = checkpoint(block_fn(w), {x}, {.save = save})[0];
    if (change_w1) {
      NoGradGuard no_grad;
      w.w1.copy_from(scale(w.w1, 2.0));
    }
    sum(mul(y, y)).backward();
    return w.w2.grad();
  };
  const Tensor unchanged = w2_grad(save_attention_and_every_other_matmul, false);
  EXPECT_TRUE(same_bits(w2_grad(save_attention_and_every_other_matmul, true), unchanged));
  EXPECT_FALSE(same_bits(w2_grad(nullptr, true), unchanged));
}

TEST(Checkpoint, SavePolicyIsTorchtitans) {
  EXPECT_TRUE(save_attention_and_every_other_matmul("scaled_dot_product_attention", 1));
  EXPECT_TRUE(save_attention_and_every_other_matmul("scaled_dot_product_attention", 2));
  EXPECT_TRUE(save_attention_and_every_other_matmul("linear", 1));
  EXPECT_FALSE(save_attention_and_every_other_matmul("linear", 2));
  EXPECT_TRUE(save_attention_and_every_other_matmul("linear", 3));
  EXPECT_FALSE(save_attention_and_every_other_matmul("rmsnorm", 1));
}

// A function that runs other ops on its second call is refused, naming the problem.
TEST(Checkpoint, RecomputeThatDivergesIsAnError) {
  Weights w = Weights::make(DType::f32, 3);
  Tensor x = randn({4, 6}, DType::f32, 4);
  x.set_requires_grad(true);
  int calls = 0;
  const Tensor y = checkpoint(
      [&](const std::vector<Tensor>& in) {
        const bool first = calls++ == 0;
        const Tensor h = first ? linear(in[0], w.w1, w.b1) : gelu(in[0]);
        return std::vector<Tensor>{sum(h)};
      },
      {x}, {.save = save_attention_and_every_other_matmul})[0];
  const std::string msg = error_of([&] { y.backward(); });
  EXPECT_NE(msg.find("the recompute used 0 of the 1 op outputs its forward kept"),
            std::string::npos)
      << msg;
}

// A checkpoint inside a checkpointed function runs as part of it; anomaly mode sees inside.
TEST(Checkpoint, NestedCheckpointAndAnomalyMode) {
  Weights w = Weights::make(DType::f32, 3);
  const Tensor x = randn({4, 6}, DType::f32, 4);
  auto plain = [&] {
    w.clear_grads();
    Tensor xi = x.detach();
    xi.set_requires_grad(true);
    sum(block(block(xi, w), w)).backward();
    return std::vector<Tensor>{xi.grad(), w.w1.grad()};
  };
  auto nested = [&] {
    w.clear_grads();
    Tensor xi = x.detach();
    xi.set_requires_grad(true);
    AnomalyModeGuard anomaly;
    const Tensor y = checkpoint(
        [&](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{block(checkpoint(block_fn(w), {in[0]})[0], w)};
        },
        {xi})[0];
    sum(y).backward();
    EXPECT_FALSE(first_anomaly().found);
    return std::vector<Tensor>{xi.grad(), w.w1.grad()};
  };
  expect_same_bits(nested(), plain());
}

}  // namespace
}  // namespace mixprec
