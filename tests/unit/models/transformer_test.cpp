// Transformer: parameter counts, forward shapes for every config variant, causality, the
// router's f32 under autocast, the loss parts, and thread-count determinism.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/amp/autocast.h"
#include "mixprec/models/transformer/transformer.h"
#include "mixprec/ops.h"
#include "models_testing.h"
#include "support/op_testing.h"

namespace mixprec::models {
namespace {

using mixprec::testing::same_bits;
using mixprec::testing::with_threads;
using testing::fp32_policy;
using testing::tiny_config;
using testing::token_grid;

TEST(Transformer, ParameterCountByHandAndMaterialized) {
  // V=16, d=16, L=2, d_ff=24, rmsnorm, swiglu, rope, tied. Per block: 2 norms (32) + q,k,v,o
  // (4·256) + MLP (3·24·16 = 1152) = 2208; plus tok_emb 256 and final_norm 16.
  Transformer gpt = testing::transformer(tiny_config("gpt"));
  EXPECT_EQ(gpt.parameters().parameter_count(), 256 + 2 * 2208 + 16);
  // moe: the MLP becomes a router (4·16) and 4 experts (4·1152).
  Transformer moe = testing::transformer(tiny_config("moe"));
  EXPECT_EQ(moe.parameters().parameter_count(), 256 + 2 * (32 + 1024 + 64 + 4 * 1152) + 16);
  // Untied head, learned positions, layernorm biases, gelu MLP (2·24·16 = 768).
  config::ModelConfig c = tiny_config("gpt");
  c.tie_embeddings = false;
  c.positions = "learned";
  c.norm = "layernorm";
  c.mlp = "gelu";
  Transformer variant = testing::transformer(c);
  EXPECT_EQ(variant.parameters().parameter_count(),
            256 + 12 * 16 + 2 * (64 + 1024 + 768) + 32 + 256);
  for (Transformer* m : {&gpt, &moe, &variant}) {
    const int64_t described = m->parameters().parameter_count();
    m->materialize(1, fp32_policy());
    int64_t held = 0;
    for (const auto& [name, p] : m->parameters().entries()) {
      EXPECT_EQ(p->name(), name);
      EXPECT_EQ(p->master().shape(), m->parameters().spec(name).shape) << name;
      held += p->master().numel();
    }
    EXPECT_EQ(held, described);
  }
}

TEST(Transformer, ForwardShapesForEveryVariant) {
  for (const char* kind : {"gpt", "moe"})
    for (const char* norm : {"rmsnorm", "layernorm"})
      for (const char* mlp : {"swiglu", "gelu"})
        for (const char* pos : {"rope", "learned"})
          for (bool tied : {true, false}) {
            config::ModelConfig c = tiny_config(kind);
            c.norm = norm;
            c.mlp = mlp;
            c.positions = pos;
            c.tie_embeddings = tied;
            const std::string what = std::string(kind) + "/" + norm + "/" + mlp + "/" + pos +
                                     (tied ? "/tied" : "/untied");
            Transformer m = testing::transformer(c);
            m.materialize(5, fp32_policy());
            EXPECT_EQ(m.parameters().contains("lm_head.weight"), !tied) << what;
            EXPECT_EQ(m.parameters().contains("pos_emb.weight"), std::string(pos) == "learned");
            const Tensor logits = m.forward(token_grid(3, 7, c.vocab_size));
            EXPECT_EQ(logits.shape(), (Shape{3, 7, 16})) << what;
            for (double v : logits.to_doubles()) ASSERT_TRUE(std::isfinite(v)) << what;
            EXPECT_EQ(m.moe_stats().size(), std::string(kind) == "moe" ? 2u : 0u) << what;
          }
}

TEST(Transformer, RejectsBadConfigsAndInputs) {
  config::ModelConfig c = tiny_config("moe");
  c.moe.top_k = 5;
  EXPECT_NE(
      mixprec::testing::error_of([&] { Transformer m = testing::transformer(c); }).find("top_k"),
      std::string::npos);
  c = tiny_config("gpt");
  c.norm = "batchnorm";
  EXPECT_NE(mixprec::testing::error_of([&] {
              Transformer m = testing::transformer(c);
            }).find("batchnorm"),
            std::string::npos);
  Transformer m = testing::transformer(tiny_config("gpt"));
  m.materialize(1, fp32_policy());
  EXPECT_NE(mixprec::testing::error_of([&] { m.forward(token_grid(1, 13, 16)); }).find("13"),
            std::string::npos);
}

// Changing token t changes no logits before t (in any row: routing capacity is spent in
// token order, so later tokens cannot displace earlier ones either).
TEST(Transformer, CausalityFutureTokensDoNotChangeEarlierLogits) {
  for (const char* kind : {"gpt", "moe"})
    for (const char* pos : {"rope", "learned"}) {
      config::ModelConfig c = tiny_config(kind);
      c.positions = pos;
      c.moe.capacity_factor = 1.0;
      Transformer m = testing::transformer(c);
      m.materialize(11, fp32_policy());
      const Tensor a = token_grid(2, 10, 16);
      Tensor b = a.clone();
      b.data<int64_t>()[1 * 10 + 6] = (b.data<int64_t>()[1 * 10 + 6] + 5) % 16;  // row 1, t = 6
      const Tensor la = m.forward(a), lb = m.forward(b);
      EXPECT_TRUE(same_bits(la.select(0, 0), lb.select(0, 0))) << kind;
      EXPECT_TRUE(same_bits(la.select(0, 1).slice(0, 0, 6), lb.select(0, 1).slice(0, 0, 6)))
          << kind << "/" << pos;
      EXPECT_FALSE(same_bits(la.select(0, 1).slice(0, 6, 10), lb.select(0, 1).slice(0, 6, 10)));
    }
}

TEST(Transformer, RouterRunsInF32UnderBf16Autocast) {
  Transformer m = testing::transformer(tiny_config("moe"));
  m.materialize(2, amp::preset("bf16-mixed"));
  amp::AutocastGuard guard(DType::bf16);
  const Tensor logits = m.forward(token_grid(2, 5, 16));
  EXPECT_EQ(logits.dtype(), DType::bf16);  // the LM head is a bf16 matmul
  ASSERT_EQ(m.router_logits().size(), 2u);
  for (const Tensor& r : m.router_logits()) {
    EXPECT_EQ(r.dtype(), DType::f32);
    EXPECT_EQ(r.shape(), (Shape{10, 4}));
  }
  const LossParts p = m.loss(token_grid(2, 5, 16), token_grid(2, 5, 16, 1));
  EXPECT_EQ(p.total.dtype(), DType::f32);
  EXPECT_EQ(p.term("aux").dtype(), DType::f32);
  EXPECT_EQ(p.term("z").dtype(), DType::f32);
}

TEST(Transformer, LossPartsCombine) {
  config::ModelConfig c = tiny_config("moe");
  c.moe.aux_loss_weight = 0.5;
  c.moe.z_loss_weight = 0.25;
  Transformer moe = testing::transformer(c);
  moe.materialize(4, fp32_policy());
  const LossParts p = moe.loss(token_grid(2, 6, 16), token_grid(2, 6, 16, 1));
  EXPECT_NEAR(p.total.item(), p.ce.item() + 0.5 * p.term("aux").item() + 0.25 * p.term("z").item(),
              1e-6);
  EXPECT_NEAR(p.ce.item(), std::log(16.0), 0.1);  // small init: nearly uniform predictions
  EXPECT_GT(p.term("aux").item(), 0.0);           // E·Σ f·P lies in (0, E]
  EXPECT_LE(p.term("aux").item(), 4.0);
  EXPECT_GT(p.term("z").item(), 0.0);
  Transformer gpt = testing::transformer(tiny_config("gpt"));
  gpt.materialize(4, fp32_policy());
  const LossParts g = gpt.loss(token_grid(2, 6, 16), token_grid(2, 6, 16, 1));
  EXPECT_TRUE(g.terms.empty());  // a dense family has no auxiliary losses
  EXPECT_EQ(g.total.item(), g.ce.item());
}

struct RunResult {
  Tensor logits;
  std::vector<Tensor> grads;
};

RunResult run_step(const config::ModelConfig& c, const amp::MixedPrecisionPolicy& policy,
                   bool autocast) {
  Transformer m = testing::transformer(c);
  m.materialize(9, policy);
  amp::AutocastGuard guard(DType::bf16, autocast);
  const Tensor tokens = token_grid(2, 12, 16), targets = token_grid(2, 12, 16, 3);
  RunResult r;
  r.logits = m.forward(tokens);
  m.loss(tokens, targets).total.backward();
  for (const auto& [name, p] : m.parameters().entries()) r.grads.push_back(p->grad());
  return r;
}

TEST(Transformer, OneAndTwoThreadsGiveTheSameBits) {
  for (const char* kind : {"gpt", "moe"})
    for (bool mixed : {false, true}) {
      config::ModelConfig c = tiny_config(kind);
      c.d_model = 32;
      c.d_ff = 64;
      const amp::MixedPrecisionPolicy policy = amp::preset(mixed ? "bf16-mixed" : "fp32");
      const RunResult one = with_threads(1, [&] { return run_step(c, policy, mixed); });
      const RunResult two = with_threads(2, [&] { return run_step(c, policy, mixed); });
      EXPECT_TRUE(same_bits(one.logits, two.logits)) << kind;
      ASSERT_EQ(one.grads.size(), two.grads.size());
      for (size_t i = 0; i < one.grads.size(); ++i) {
        ASSERT_TRUE(one.grads[i].defined()) << kind << " param " << i;
        EXPECT_TRUE(same_bits(one.grads[i], two.grads[i])) << kind << " param " << i;
      }
    }
}

}  // namespace
}  // namespace mixprec::models
