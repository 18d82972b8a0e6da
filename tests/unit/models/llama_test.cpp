// The llama3 family: torchtitan's sizing and initialisation, grouped-query attention's shapes
// and Adam-mini roles, the truncated-normal init rule, and what the planner counts for GQA.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>

#include "mixprec/models/parameter_set.h"
#include "mixprec/models/registry.h"
#include "mixprec/models/transformer/ffn_sizing.h"
#include "models_testing.h"

namespace mixprec::models {
namespace {

config::ModelConfig llama(int64_t kv_heads) {
  config::ModelConfig c;
  c.kind = "llama3";
  c.vocab_size = 256;
  c.d_model = 256;
  c.n_layers = 8;
  c.n_heads = 16;
  c.n_kv_heads = kv_heads;
  c.multiple_of = 256;
  c.d_ff = 768;
  c.max_seq_len = 256;
  c.rope_theta = 500000.0;
  c.tie_embeddings = false;
  return c;
}

struct Moments {
  double mean = 0, std = 0, max_abs = 0;
};

Moments moments(const Tensor& t) {
  const std::vector<double> v = t.to_doubles();
  Moments m;
  for (double x : v) m.mean += x / static_cast<double>(v.size());
  for (double x : v) {
    m.std += (x - m.mean) * (x - m.mean) / static_cast<double>(v.size());
    m.max_abs = std::max(m.max_abs, std::fabs(x));
  }
  m.std = std::sqrt(m.std);
  return m;
}

TEST(Llama, FeedForwardSizingIsTorchtitans) {
  EXPECT_EQ(llama_ffn_hidden_dim(256, 256, 0.0), 768);      // the debug model: 682 -> 768
  EXPECT_EQ(llama_ffn_hidden_dim(4096, 256, 0.0), 11008);   // Llama 2 7B
  EXPECT_EQ(llama_ffn_hidden_dim(4096, 1024, 1.3), 14336);  // Llama 3 8B
  EXPECT_EQ(llama_ffn_hidden_dim(8192, 4096, 1.3), 28672);  // Llama 3 70B
  EXPECT_EQ(llama_ffn_hidden_dim(768, 256, 1.3), 2816);
  EXPECT_THROW(llama_ffn_hidden_dim(256, 0, 0.0), Error);
}

TEST(Llama, DebugModelCountsAsTorchtitans) {
  const auto m = make_model(llama(0));
  // 2 V d (embedding, untied output) + L (4 d^2 + 3 d F + 2 d) + d
  EXPECT_EQ(m->parameters().parameter_count(),
            2 * 256 * 256 + 8 * (4 * 256 * 256 + 3 * 256 * 768 + 2 * 256) + 256);
  EXPECT_NE(m->describe().find("rope positions (theta 500000)"), std::string::npos)
      << m->describe();
  EXPECT_FALSE(m->parameters().contains("blocks.0.attn.wq_bias"));
  EXPECT_TRUE(m->parameters().contains("lm_head.weight"));
}

TEST(Llama, InitIsTorchtitans) {
  const auto m = make_model(llama(0));
  const ParameterSet& p = m->parameters();
  EXPECT_EQ(p.spec("tok_emb.weight").init.std, 1.0);
  EXPECT_EQ(p.spec("blocks.0.attn.wq").init.std, 0.02);
  EXPECT_EQ(p.spec("blocks.3.mlp.w_gate").init.std, 0.02);
  // Depth init: the residual outputs and w_up (torchtitan's w3) by the layer's own depth.
  for (int64_t l : {0, 7})
    for (const char* name : {"attn.wo", "mlp.w_down", "mlp.w_up"})
      EXPECT_DOUBLE_EQ(p.spec("blocks." + std::to_string(l) + "." + name).init.std,
                       0.02 / std::sqrt(2.0 * static_cast<double>(l + 1)))
          << l << " " << name;
  const InitRule out = p.spec("lm_head.weight").init;
  EXPECT_DOUBLE_EQ(out.std, 1.0 / 16.0);
  EXPECT_EQ(out.cutoff, 3.0);
  // Drawn: the output truncated at 3 std (a truncated normal's std is 0.9866 of its scale).
  const Moments head = moments(initial_values(p.spec("lm_head.weight"), 5));
  EXPECT_LE(head.max_abs, 3.0 / 16.0);
  EXPECT_GT(head.max_abs, 2.9 / 16.0);  // the bound is reached, not a lower one
  EXPECT_NEAR(head.std, 0.9866 / 16.0, 0.01 / 16.0);
  const Moments emb = moments(initial_values(p.spec("tok_emb.weight"), 5));
  EXPECT_NEAR(emb.std, 1.0, 0.01);
  EXPECT_GT(emb.max_abs, 4.0);  // untruncated
}

TEST(Llama, ATiedLlamaStartsFromHuggingFacesInitializerRange) {
  config::ModelConfig c = llama(0);
  c.tie_embeddings = true;  // as Llama 3.2 1B
  const auto m = make_model(c);
  const InitRule r = m->parameters().spec("tok_emb.weight").init;
  EXPECT_DOUBLE_EQ(r.std, 0.02);
  // The first loss is near ln V, not the tens an N(0, 1) tied matrix gives.
  m->materialize(2, testing::fp32_policy());
  const double loss =
      m->loss(testing::token_grid(2, 16, 256), testing::token_grid(2, 16, 256, 1)).total.item();
  EXPECT_NEAR(loss, std::log(256.0), 1.0);
  std::cout << "tied llama3, first loss " << loss << "\n";
}

TEST(Llama, TruncatedRangeIsASliceOfTheWhole) {
  // A sharded rank draws its range alone; redraws must not depend on where the range starts.
  const ParamSpec spec{"x", {40, 50}, {}, {InitKind::normal, 0.5, 1.0}};  // cutoff 1: 32% redrawn
  const std::vector<double> whole = initial_values(spec, 9).to_doubles();
  const std::vector<double> part = initial_values_range(spec, 9, 777, 1500).to_doubles();
  for (size_t i = 0; i < part.size(); ++i) ASSERT_EQ(part[i], whole[777 + i]) << i;
  for (double v : whole) ASSERT_LE(std::fabs(v), 0.5);
}

TEST(Llama, GroupedQueryAttentionShapesAndRoles) {
  const auto m = make_model(llama(4));
  const ParameterSet& p = m->parameters();
  EXPECT_EQ(p.spec("blocks.0.attn.wq").shape, (Shape{256, 256}));
  EXPECT_EQ(p.spec("blocks.0.attn.wk").shape, (Shape{64, 256}));  // 4 heads of 16
  EXPECT_EQ(p.spec("blocks.0.attn.wv").shape, (Shape{64, 256}));
  EXPECT_EQ(p.spec("blocks.0.attn.wq").role.heads, 16);
  EXPECT_EQ(p.spec("blocks.0.attn.wk").role.heads, 4);  // Adam-mini: one block per kv head
  EXPECT_NE(m->describe().find("16 heads (4 kv)"), std::string::npos) << m->describe();
  // k, v and their gradients shrink by the group in the planner's count.
  const auto policy = amp::preset("bf16-mixed");
  const auto gqa = m->estimate_activations(policy, 4, 128);
  const auto mha = make_model(llama(0))->estimate_activations(policy, 4, 128);
  EXPECT_EQ(mha.block_saved - gqa.block_saved, 2u * 2u * 4u * 128u * (256u - 64u));
  // It trains: a forward and backward through the GQA kernels.
  m->materialize(1, testing::fp32_policy());
  const Tensor tokens = testing::token_grid(2, 16, 256);
  LossParts loss = m->loss(tokens, testing::token_grid(2, 16, 256, 1));
  loss.total.backward();
  EXPECT_TRUE(std::isfinite(loss.total.item()));
  EXPECT_TRUE(m->parameters().at("blocks.1.attn.wk").grad().defined());
}

TEST(Llama, ArchitectureKeysAreFixed) {
  config::ModelConfig c = llama(0);
  c.norm = "layernorm";
  EXPECT_THROW(make_model(c), Error);
  c = llama(3);  // does not divide 16
  EXPECT_THROW(make_model(c), Error);
  c = llama(0);
  c.d_ff = 700;  // multiple_of 256 gives 768
  EXPECT_THROW(make_model(c), Error);
}

}  // namespace
}  // namespace mixprec::models
