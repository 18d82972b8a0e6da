// Activation checkpointing in the transformer (models/activation_checkpoint.h): every mode
// gives the losses and every parameter's gradient of mode none bit for bit, for each family
// and precision policy (the forward under the policy's ComputeScope, backward outside it, as
// the trainer runs them); full checkpointing lowers the allocator's peak; the estimate counts
// what each mode keeps.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/amp/compute_scope.h"
#include "mixprec/autograd/record_tensor_ops.h"
#include "mixprec/core/error.h"
#include "mixprec/models/activation_checkpoint.h"
#include "mixprec/models/transformer/transformer.h"
#include "mixprec/tensor/allocator.h"
#include "models_testing.h"
#include "support/op_testing.h"

namespace mixprec::models {
namespace {

using testing::tiny_config;
using testing::token_grid;

ActivationCheckpoint ac(const std::string& mode, const std::string& option = "2") {
  return ActivationCheckpoint::from_config({.mode = mode, .selective_ac_option = option});
}

// The family's tiny config; gpt in GPT-2's form (LayerNorm, GELU, learned positions, biases).
config::ModelConfig family_config(const char* kind) {
  config::ModelConfig c = tiny_config(kind);
  if (std::string(kind) == "gpt") {
    c.norm = "layernorm";
    c.mlp = "gelu";
    c.positions = "learned";
    c.bias = true;
  }
  return c;
}

struct Step {
  LossParts loss;
  std::vector<std::pair<std::string, Tensor>> grads;
  std::size_t moe_records = 0;
};

// One forward + backward of a fresh model (seed 7) under `policy`; fp16 with a loss scale.
Step run(const config::ModelConfig& mc, const amp::MixedPrecisionPolicy& policy,
         const ActivationCheckpoint& checkpoint, const Tensor& x, const Tensor& y) {
  Transformer m = testing::transformer(mc);
  m.materialize(7, policy);
  m.set_activation_checkpoint(checkpoint);
  Step s;
  {
    amp::ComputeScope compute(policy);
    s.loss = m.loss(x, y);
  }
  const double loss_scale = policy.loss_scaling ? 1024.0 : 1.0;
  (policy.loss_scaling ? scaled(s.loss.total, loss_scale) : s.loss.total).backward();
  for (const auto& [name, p] : m.parameters().entries()) s.grads.emplace_back(name, p->grad());
  s.moe_records = m.moe_stats().size();
  EXPECT_EQ(m.router_logits().size(), s.moe_records);
  return s;
}

struct Case {
  const char* kind;
  const char* precision;
};

class CheckpointedModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(CheckpointedModelTest, LossesAndGradientsAreModeNonesBitForBit) {
  const Case c = GetParam();
  config::ModelConfig mc = family_config(c.kind);
  mc.n_layers = 3;  // selective "2" checkpoints block 1 only
  mc.moe.z_loss_weight = 1e-3;
  const amp::MixedPrecisionPolicy policy = amp::parse_policy(c.precision);
  const Tensor x = token_grid(3, 10, mc.vocab_size), y = token_grid(3, 10, mc.vocab_size, 1);
  const Step none = run(mc, policy, {}, x, y);
  for (const auto& [mode, option] : std::vector<std::pair<std::string, std::string>>{
           {"full", "2"}, {"selective", "op"}, {"selective", "2"}, {"selective", "1"}}) {
    SCOPED_TRACE(mode + " " + option);
    const Step s = run(mc, policy, ac(mode, option), x, y);
    EXPECT_TRUE(mixprec::testing::same_bits(s.loss.total, none.loss.total))
        << s.loss.total.item() << " vs " << none.loss.total.item();
    ASSERT_EQ(s.loss.terms.size(), none.loss.terms.size());
    for (std::size_t i = 0; i < s.loss.terms.size(); ++i) {
      EXPECT_EQ(s.loss.terms[i].first, none.loss.terms[i].first);
      EXPECT_TRUE(mixprec::testing::same_bits(s.loss.terms[i].second, none.loss.terms[i].second))
          << s.loss.terms[i].first;
    }
    // One record per MoE block: a recompute adds none.
    EXPECT_EQ(s.moe_records, none.moe_records);
    ASSERT_EQ(s.grads.size(), none.grads.size());
    for (std::size_t i = 0; i < s.grads.size(); ++i) {
      const auto& [name, g] = s.grads[i];
      ASSERT_EQ(g.defined(), none.grads[i].second.defined()) << name;
      if (!g.defined()) continue;
      EXPECT_TRUE(mixprec::testing::same_bits(g, none.grads[i].second))
          << name << " differs by " << mixprec::testing::max_abs_diff(g, none.grads[i].second);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Families, CheckpointedModelTest,
    ::testing::Values(Case{"gpt", "fp32"}, Case{"gpt", "bf16-mixed"}, Case{"gpt", "fp16-mixed"},
                      Case{"llama3", "fp32"}, Case{"llama3", "bf16-mixed"},
                      Case{"llama3", "fp16-mixed"}, Case{"moe", "fp32"}, Case{"moe", "bf16-mixed"},
                      Case{"moe", "fp16-mixed"}, Case{"qwen3", "bf16-mixed"},
                      Case{"qwen3", "fp16-mixed"},
                      // f32 weights cast by autocast at every product (torch.autocast's
                      // recipe), and TF32 products: the recompute must repeat both.
                      Case{"gpt", "params=f32,compute=bf16"},
                      Case{"llama3", "params=f32,compute=f16,loss_scaling=true"},
                      Case{"llama3", "tf32"}),
    [](const auto& info) {
      std::string n = std::string(info.param.kind) + "_" + info.param.precision;
      for (char& ch : n)
        if (ch == '-' || ch == '=' || ch == ',') ch = '_';
      return n;
    });

// The allocator's peak over forward + backward of a 6-block model.
std::size_t peak_bytes(const ActivationCheckpoint& checkpoint, const char* kind) {
  config::ModelConfig mc = family_config(kind);
  mc.n_layers = 6;
  mc.d_model = 64;
  mc.n_heads = 4;
  mc.d_ff = 128;
  mc.vocab_size = 32;
  mc.max_seq_len = 64;
  const amp::MixedPrecisionPolicy policy = amp::preset("bf16-mixed");
  Transformer m = testing::transformer(mc);
  m.materialize(7, policy);
  m.set_activation_checkpoint(checkpoint);
  const Tensor x = token_grid(4, 64, mc.vocab_size), y = token_grid(4, 64, mc.vocab_size, 1);
  Allocator& alloc = Allocator::instance();
  alloc.reset_peak();
  const std::size_t before = alloc.stats().current_bytes;
  {
    Tensor loss;
    {
      amp::ComputeScope compute(policy);
      loss = m.loss(x, y).total;
    }
    loss.backward();
  }
  return alloc.stats().peak_bytes - before;
}

TEST(ActivationCheckpointMemory, FullAndSelectiveLowerThePeak) {
  for (const char* kind : {"gpt", "llama3", "moe"}) {
    const std::size_t none = peak_bytes({}, kind), full = peak_bytes(ac("full"), kind);
    const std::size_t op = peak_bytes(ac("selective", "op"), kind);
    const std::size_t every2 = peak_bytes(ac("selective", "2"), kind);
    std::printf("%s peak bytes: none %zu, selective op %zu, selective 2 %zu, full %zu\n", kind,
                none, op, every2, full);
    EXPECT_LT(full, none) << kind;
    EXPECT_LT(full, every2) << kind;
    EXPECT_LT(every2, none) << kind;
    EXPECT_LT(op, none) << kind;
    EXPECT_LT(full, op) << kind;
  }
}

TEST(ActivationCheckpointConfig, BlocksFollowTorchtitansCount) {
  EXPECT_EQ(ActivationCheckpoint().block(0), BlockCheckpoint::none);
  EXPECT_EQ(ac("none").every(), 0);
  EXPECT_EQ(ac("full").block(3), BlockCheckpoint::full);
  EXPECT_EQ(ac("selective", "op").block(0), BlockCheckpoint::selective_ops);
  const ActivationCheckpoint every3 = ac("selective", "3");
  EXPECT_EQ(every3.every(), 3);
  std::vector<BlockCheckpoint> blocks;
  for (int64_t l = 0; l < 6; ++l) blocks.push_back(every3.block(l));
  const auto n = BlockCheckpoint::none, f = BlockCheckpoint::full;
  EXPECT_EQ(blocks, (std::vector<BlockCheckpoint>{n, n, f, n, n, f}));  // blocks 3 and 6 of 6
  EXPECT_EQ(ac("full", "junk").block(0), BlockCheckpoint::full);        // not read by full
}

TEST(ActivationCheckpointConfig, BadValuesNameTheKeyAndValue) {
  using mixprec::testing::error_of;
  std::string msg = error_of([] { ac("partial"); });
  EXPECT_NE(msg.find("activation_checkpoint.mode"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"partial\""), std::string::npos) << msg;
  for (const char* bad : {"0", "-2", "x", "", "2x", "+2", "ops"}) {
    msg = error_of([&] { ac("selective", bad); });
    EXPECT_NE(msg.find("activation_checkpoint.selective_ac_option"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("\"") + bad + "\""), std::string::npos) << msg;
  }
}

// What each mode keeps per block, by the estimate's own terms (r the residual's bytes, c the
// compute dtype's, a f32's; N tokens): full keeps the input, selective "op" also attention's
// output (+ its f32 copy, log-sum-exp) and the odd linears' outputs.
TEST(ActivationCheckpointEstimate, CountsWhatEachModeKeeps) {
  config::ModelConfig mc = tiny_config("llama3");
  mc.n_layers = 4;
  mc.d_model = 64;
  mc.n_heads = 4;
  mc.n_kv_heads = 2;
  mc.d_ff = 96;
  const int64_t N = 2 * 32, d = 64, kv = 32, F = 96, H = 4;
  const amp::MixedPrecisionPolicy bf16 = amp::preset("bf16-mixed");
  Transformer m = testing::transformer(mc);
  const ActivationEstimate none = m.estimate_activations(bf16, 2, 32);
  EXPECT_EQ(none.checkpoint_every, 0);
  EXPECT_EQ(none.saved(), none.root_saved + 4 * none.block_saved);

  m.set_activation_checkpoint(ac("full"));
  const ActivationEstimate full = m.estimate_activations(bf16, 2, 32);
  EXPECT_EQ(full.checkpoint_every, 1);
  EXPECT_EQ(full.checkpointed_saved, std::size_t(2 * N * d));  // the bf16 input
  EXPECT_EQ(full.block_saved, none.block_saved);               // live again in its backward
  EXPECT_EQ(full.saved(), none.root_saved + 4 * full.checkpointed_saved);
  EXPECT_EQ(none.recompute_transient(), 0u);
  EXPECT_EQ(full.recompute_transient(), full.block_saved - full.checkpointed_saved);

  m.set_activation_checkpoint(ac("selective", "op"));
  const ActivationEstimate op = m.estimate_activations(bf16, 2, 32);
  const std::size_t attention = 2 * N * d + 4 * N * d + 4 * N * H;
  const std::size_t linears = 2 * N * d + 2 * N * kv + 2 * N * F + 2 * N * d;  // wq wv up down
  EXPECT_EQ(op.checkpointed_saved, 2 * N * d + attention + linears);
  EXPECT_LT(op.checkpointed_saved, none.block_saved);

  m.set_activation_checkpoint(ac("selective", "2"));
  const ActivationEstimate every2 = m.estimate_activations(bf16, 2, 32);
  EXPECT_EQ(every2.checkpoint_every, 2);
  EXPECT_EQ(every2.saved(), none.root_saved + 2 * none.block_saved + 2 * full.checkpointed_saved);
  EXPECT_EQ(every2.blocks_saved(2), none.block_saved + full.checkpointed_saved);

  EXPECT_LT(full.total(), every2.total());
  EXPECT_LT(every2.total(), none.total());
  EXPECT_LT(op.total(), none.total());
}

// A MoE block also keeps the router logits its forward recorded (the model holds them).
TEST(ActivationCheckpointEstimate, MoeKeepsTheRecordedRouterLogits) {
  config::ModelConfig mc = tiny_config("moe");
  Transformer m = testing::transformer(mc);
  m.set_activation_checkpoint(ac("full"));
  const ActivationEstimate e = m.estimate_activations(amp::preset("fp32"), 2, 8);
  EXPECT_EQ(e.checkpointed_saved, std::size_t(4 * 16 * 16 + 4 * 16 * 4));  // input, logits
}

}  // namespace
}  // namespace mixprec::models
