// The qwen3 family: torchtitan's debug-model shapes (heads of model.head_dim beside a narrower
// d_model, per-head q/k norms), its plain N(0, 0.02) init, config errors naming the key, what
// the q/k norms do to the logits, an f64 gradcheck through them, decoding with the key/value
// cache, the activation estimate's extra bytes and the describe line.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/amp/compute_scope.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/io/config_file.h"
#include "mixprec/models/parameter_set.h"
#include "mixprec/models/registry.h"
#include "mixprec/models/unit_hooks.h"
#include "models_testing.h"
#include "support/op_testing.h"

namespace mixprec::models {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::expect_close;
using mixprec::testing::max_abs_diff;
using testing::F64Weights;
using testing::logits;
using testing::set_values;

// torchtitan's qwen3 debugmodel with the byte tokenizer's vocabulary, as the shipped config
// writes it (config/qwen3_config_test.cpp checks the file against torchtitan's values).
config::ModelConfig qwen3_debug() {
  return config::load_config(std::string(MIXPREC_SOURCE_DIR) + "/configs/qwen3_debug.toml").model;
}

// Small enough to run many times: 4 heads of 6 (q 24 wide beside d_model 16), 2 kv heads.
config::ModelConfig tiny_qwen3() {
  config::ModelConfig c;
  c.kind = "qwen3";
  c.vocab_size = 20;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 6;
  c.d_ff = 24;
  c.max_seq_len = 24;
  c.norm_eps = 1e-6;
  c.rope_theta = 1e6;
  c.tie_embeddings = false;
  c.qk_norm = true;
  return c;
}

// Norm gains away from 1 (so the order of norm and RoPE matters) in every block.
void spread_norm_gains(ParameterSet& p, int64_t layers) {
  for (int64_t l = 0; l < layers; ++l)
    for (const char* n : {"q_norm", "k_norm"})
      set_values(p, "blocks." + std::to_string(l) + ".attn." + n + ".weight",
                 [](std::size_t i, double) { return 0.6 + 0.15 * static_cast<double>(i % 5); });
}

TEST(Qwen3, DebugModelNamesShapesAndRoles) {
  const auto m = make_model(qwen3_debug());
  const ParameterSet& p = m->parameters();
  EXPECT_EQ(p.spec("blocks.0.attn.wq").shape, (Shape{2048, 256}));  // 16 heads of 128
  EXPECT_EQ(p.spec("blocks.0.attn.wk").shape, (Shape{1024, 256}));  // 8 kv heads of 128
  EXPECT_EQ(p.spec("blocks.0.attn.wv").shape, (Shape{1024, 256}));
  EXPECT_EQ(p.spec("blocks.0.attn.wo").shape, (Shape{256, 2048}));
  EXPECT_EQ(p.spec("blocks.0.mlp.w_gate").shape, (Shape{3072, 256}));
  for (const char* n : {"blocks.7.attn.q_norm.weight", "blocks.7.attn.k_norm.weight"}) {
    const ParamSpec& s = p.spec(n);
    EXPECT_EQ(s.shape, (Shape{128})) << n;
    EXPECT_EQ(s.init.kind, InitKind::ones) << n;
    EXPECT_TRUE(s.role.no_weight_decay) << n;  // a gain: no decay under "matrices"
    EXPECT_EQ(s.unit, "blocks.7") << n;
  }
  EXPECT_EQ(p.spec("blocks.0.attn.wq").role.heads, 16);  // Adam-mini: a block per head
  EXPECT_EQ(p.spec("blocks.0.attn.wk").role.heads, 8);
  EXPECT_FALSE(p.contains("lm_head.weight"));  // tied, as the debug flavor
  EXPECT_FALSE(p.contains("blocks.0.attn.wq_bias"));
  // V d (tied) + L (2 q d + 2 kv d + 3 d F + 2 d + 2 Dh) + d
  EXPECT_EQ(
      p.parameter_count(),
      256 * 256 + 8 * (2 * 2048 * 256 + 2 * 1024 * 256 + 3 * 256 * 3072 + 2 * 256 + 2 * 128) + 256);
}

TEST(Qwen3, InitIsTorchtitansPlainNormal) {
  config::ModelConfig c = qwen3_debug();
  c.tie_embeddings = false;  // as the 8B and larger flavors
  const auto m = make_model(c);
  const ParameterSet& p = m->parameters();
  std::vector<std::string> linears{"tok_emb.weight", "lm_head.weight"};
  for (int64_t l : {0, 7})
    for (const char* n :
         {"attn.wq", "attn.wk", "attn.wv", "attn.wo", "mlp.w_gate", "mlp.w_up", "mlp.w_down"})
      linears.push_back("blocks." + std::to_string(l) + "." + n);
  for (const std::string& n : linears) {
    const InitRule r = p.spec(n).init;
    EXPECT_EQ(r.kind, InitKind::normal) << n;
    EXPECT_EQ(r.std, 0.02) << n;  // no depth scaling, wo and w_down included
    EXPECT_EQ(r.cutoff, 0.0) << n;
  }
  for (const char* n : {"blocks.3.attn_norm.weight", "blocks.3.mlp_norm.weight",
                        "blocks.3.attn.q_norm.weight", "final_norm.weight"})
    EXPECT_EQ(p.spec(n).init.kind, InitKind::ones) << n;
}

TEST(Qwen3, ConfigErrorsNameTheKey) {
  struct Case {
    const char* key;
    void (*change)(config::ModelConfig&);
  };
  const Case cases[] = {
      {"model.qk_norm", [](config::ModelConfig& c) { c.qk_norm = false; }},
      {"model.head_dim", [](config::ModelConfig& c) { c.head_dim = 7; }},  // odd, under RoPE
      {"model.head_dim", [](config::ModelConfig& c) { c.head_dim = -2; }},
      {"model.head_dim", [](config::ModelConfig& c) { c.head_dim = int64_t{1} << 22; }},
      {"model.n_heads",
       [](config::ModelConfig& c) {
         c.head_dim = 0;  // then the heads must divide d_model
         c.n_heads = 24;
       }},
      {"model.norm", [](config::ModelConfig& c) { c.norm = "layernorm"; }},
      {"model.mlp", [](config::ModelConfig& c) { c.mlp = "gelu"; }},
      {"model.positions", [](config::ModelConfig& c) { c.positions = "learned"; }},
      {"model.bias", [](config::ModelConfig& c) { c.bias = true; }},
  };
  for (const Case& k : cases) {
    config::ModelConfig c = qwen3_debug();
    k.change(c);
    const std::string e = error_of([&] { make_model(c); });
    EXPECT_NE(e.find("[model] " + std::string(k.key) + " "), std::string::npos) << e;
  }
  // With head_dim given, the heads need not divide d_model.
  config::ModelConfig c = qwen3_debug();
  c.n_heads = 24;
  EXPECT_EQ(make_model(c)->parameters().spec("blocks.0.attn.wq").shape, (Shape{24 * 128, 256}));
}

// The norms act on each head's own Dh features: scaling one head's q rows (or one kv head's k
// rows) leaves the logits as they were, which it does not without them; and they change the
// logits of the same weights.
TEST(Qwen3, QkNormMakesEachHeadsScaleIrrelevant) {
  config::ModelConfig on = tiny_qwen3();
  on.norm_eps = 1e-12;  // so the invariance is exact to f32 rounding
  config::ModelConfig off = on;
  off.kind = "gpt";  // the same decoder without q/k norms
  off.qk_norm = false;
  auto with_norms = make_model(on), without = make_model(off);
  with_norms->materialize(5, testing::fp32_policy());
  without->materialize(5, testing::fp32_policy());
  ParameterSet &p = with_norms->parameters(), &q = without->parameters();
  spread_norm_gains(p, on.n_layers);
  // q and k 8x their init, so that attention is far from uniform and a head's scale matters
  // without the norms.
  for (int64_t l = 0; l < on.n_layers; ++l)
    for (const char* n : {"attn.wq", "attn.wk"})
      set_values(p, "blocks." + std::to_string(l) + "." + n,
                 [](std::size_t, double v) { return 8 * v; });
  for (const ParamSpec& s : q.specs()) {
    const std::vector<double> v = p.at(s.name).master().to_doubles();
    set_values(q, s.name, [&](std::size_t i, double) { return v[i]; });
  }
  const Tensor tokens = testing::token_grid(2, 10, on.vocab_size);
  const Tensor a = logits(*with_norms, tokens), b = logits(*without, tokens);
  EXPECT_GT(max_abs_diff(a, b), 1e-3);  // qk_norm on vs off
  // Head 1's q rows (6..11) x 5, kv head 0's k rows (0..5) x 0.2, in block 0.
  auto scale_heads = [](ParameterSet& ps) {
    set_values(ps, "blocks.0.attn.wq",
               [](std::size_t i, double v) { return i / 16 >= 6 && i / 16 < 12 ? 5 * v : v; });
    set_values(ps, "blocks.0.attn.wk",
               [](std::size_t i, double v) { return i / 16 < 6 ? 0.2 * v : v; });
  };
  scale_heads(p);
  scale_heads(q);
  expect_close(logits(*with_norms, tokens), a, 1e-6, 1e-5, "heads rescaled under qk_norm");
  EXPECT_GT(max_abs_diff(logits(*without, tokens), b), 1e-3);
}

TEST(Qwen3, GradientsThroughTheQkNormsMatchF64Differences) {
  auto m = make_model(tiny_qwen3());
  m->materialize(6, testing::fp32_policy());
  spread_norm_gains(m->parameters(), 2);
  F64Weights f64(m->parameters());
  m->set_unit_hooks(&f64);
  const Tensor tokens = testing::token_grid(2, 5, 20);
  std::vector<Tensor> inputs;
  for (const char* n : {"blocks.0.attn.q_norm.weight", "blocks.0.attn.k_norm.weight",
                        "blocks.0.attn.wq", "blocks.1.attn.wk", "blocks.1.attn.k_norm.weight"})
    inputs.push_back(f64.weight(n));  // the forward's own leaves: perturbed in place
  mixprec::testing::expect_gradcheck([&](const std::vector<Tensor>&) { return m->forward(tokens); },
                                     inputs, "qwen3 through q/k norms", 1e-6, 1e-8, 1e-6);
  m->set_unit_hooks(nullptr);
}

TEST(Qwen3, DecodingWithTheCacheGivesTheForwardsLogits) {
  for (const char* precision : {"fp32", "bf16-mixed"}) {
    SCOPED_TRACE(precision);
    const auto m = make_model(tiny_qwen3());
    m->materialize(7, amp::preset(precision));
    spread_norm_gains(m->parameters(), 2);
    amp::ComputeScope scope(amp::preset(precision));
    testing::expect_cached_decoding_matches(*m, testing::token_grid(1, 20, 20),
                                            std::string(precision) == "fp32");
  }
}

// Beside the same decoder without them, the norms keep q and k's narrow inputs and a statistic
// per row and head: c·N·(q + kv) + a·N·(H + n_kv_heads) per block.
TEST(Qwen3, TheEstimateCountsTheQkNormsInputs) {
  config::ModelConfig off = qwen3_debug();
  off.kind = "gpt";
  off.qk_norm = false;
  const auto policy = amp::preset("bf16-mixed");
  const auto with = make_model(qwen3_debug())->estimate_activations(policy, 2, 64);
  const auto without = make_model(off)->estimate_activations(policy, 2, 64);
  const std::size_t N = 128;
  EXPECT_EQ(with.block_saved - without.block_saved, 2 * N * (2048 + 1024) + 4 * N * (16 + 8));
  EXPECT_EQ(with.block_backward_transient - without.block_backward_transient,
            4 * N * (2048 + 1024));  // dq, dk widened for the norms
}

TEST(Qwen3, DescribeNamesTheHeadWidthAndTheNorms) {
  EXPECT_EQ(make_model(qwen3_debug())->describe(),
            "model: qwen3 | d_model 256 | 8 layers | 16 heads (8 kv) of 128, qk-norm | d_ff 3072 | "
            "rmsnorm | swiglu | rope positions (theta 1e+06) | vocab 256");
}

}  // namespace
}  // namespace mixprec::models
