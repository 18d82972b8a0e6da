// The DeepSeek-style MoE transformer: first dense blocks, shared experts, the expert biases
// as buffers, their update by hand, and the counts the trainer balances from.
#include <gtest/gtest.h>

#include <numeric>

#include "mixprec/amp/compute_scope.h"
#include "mixprec/models/transformer/transformer.h"
#include "unit/models/models_testing.h"

namespace mixprec::models {
namespace {

config::ModelConfig deepseek_tiny() {
  config::ModelConfig c = testing::tiny_config("moe");
  c.n_layers = 3;
  c.moe.n_experts = 4;
  c.moe.top_k = 2;
  c.moe.n_shared_experts = 2;
  c.moe.n_dense_layers = 1;
  c.moe.dense_d_ff = 40;
  c.moe.load_balance_coeff = 0.01;
  c.moe.score_func = "sigmoid";
  return c;
}

TEST(MoeBalancing, DenseFirstBlocksSharedExpertsAndBiasBuffers) {
  const Transformer t = testing::transformer(deepseek_tiny());
  const ParameterSet& p = t.parameters();
  EXPECT_EQ(p.spec("blocks.0.mlp.w_up").shape, (Shape{40, 16}));
  EXPECT_FALSE(p.contains("blocks.0.moe.router"));
  EXPECT_EQ(p.spec("blocks.1.moe.shared_experts.w_gate").shape, (Shape{48, 16}));
  EXPECT_EQ(p.spec("blocks.2.moe.experts.w_down").shape, (Shape{4, 16, 24}));  // stacked
  ASSERT_EQ(t.buffers().size(), 2u);
  EXPECT_EQ(t.buffers()[0].first, "blocks.1.moe.expert_bias");
  EXPECT_EQ(t.buffers()[1].first, "blocks.2.moe.expert_bias");
  EXPECT_EQ(t.buffers()[0].second.dtype(), DType::f32);
  // Active: everything but 2 of the 4 routed experts of each MoE block.
  const int64_t expert = 3 * 16 * 24;
  EXPECT_EQ(*t.active_parameter_count(), p.parameter_count() - 2 * 2 * expert);
  // One parameter per expert under idle_experts = "skip", as many in all.
  config::ModelConfig skip = deepseek_tiny();
  skip.moe.idle_experts = "skip";
  const Transformer per_expert = testing::transformer(skip);
  EXPECT_EQ(per_expert.parameters().spec("blocks.2.moe.experts.3.w_down").shape, (Shape{16, 24}));
  EXPECT_EQ(per_expert.parameters().parameter_count(), p.parameter_count());
  EXPECT_EQ(*per_expert.active_parameter_count(), *t.active_parameter_count());
  // No bias without load_balance_coeff.
  config::ModelConfig plain = deepseek_tiny();
  plain.moe.load_balance_coeff = 0;
  EXPECT_TRUE(testing::transformer(plain).buffers().empty());
}

// Block 1: counts (5, 1, 1, 1), mean 2: δ = 0.01·(-1, 1, 1, 1), re-centred by mean(δ) = 0.005.
// Block 2 is balanced: no change.
TEST(MoeBalancing, ExpertBiasUpdateByHand) {
  Transformer t = testing::transformer(deepseek_tiny());
  t.update_buffers({5, 1, 1, 1, 2, 2, 2, 2});
  EXPECT_EQ(t.buffers()[0].second.to_doubles(),
            (std::vector<double>{static_cast<float>(-0.015), static_cast<float>(0.005),
                                 static_cast<float>(0.005), static_cast<float>(0.005)}));
  EXPECT_EQ(t.buffers()[1].second.to_doubles(), std::vector<double>(4, 0.0));
  EXPECT_THROW(t.update_buffers({1, 2, 3}), Error);
}

TEST(MoeBalancing, CountsPerMoeBlockAndTheBiasSteersRouting) {
  Transformer t = testing::transformer(deepseek_tiny());
  t.materialize(3, testing::fp32_policy());
  const Tensor tokens = testing::token_grid(2, 8, 16);
  {
    amp::ComputeScope scope(testing::fp32_policy());
    t.forward(tokens);
  }
  const std::vector<int64_t> counts = t.step_counts();
  ASSERT_EQ(counts.size(), 8u);  // 2 MoE blocks x 4 experts
  EXPECT_EQ(std::accumulate(counts.begin(), counts.begin() + 4, int64_t{0}), 2 * 8 * 2);
  EXPECT_EQ(std::accumulate(counts.begin() + 4, counts.end(), int64_t{0}), 2 * 8 * 2);
  // A bias far above the sigmoid scores' range sends every token to experts 0 and 3.
  Tensor bias = t.buffers()[0].second;
  bias.copy_from(Tensor::from_vector<float>({5.0f, -5.0f, -5.0f, 5.0f}, {4}));
  {
    amp::ComputeScope scope(testing::fp32_policy());
    t.forward(tokens);
  }
  const std::vector<int64_t> steered = t.step_counts();
  EXPECT_EQ(std::vector<int64_t>(steered.begin(), steered.begin() + 4),
            (std::vector<int64_t>{16, 0, 0, 16}));
}

}  // namespace
}  // namespace mixprec::models
