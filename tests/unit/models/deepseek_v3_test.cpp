// The deepseek_v3 family: torchtitan's debug-model shapes and init (latent attention's
// projections and norms, stacked experts), config errors naming the key, the YaRN softmax
// correction, f64 gradchecks through both query paths, decoding with the key/value cache (v
// narrower and wider than q·k), the activation estimate's latent terms and the describe line.
// Agreement with Hugging Face's math and torchtitan's training step is tested against PyTorch
// (tests/reference: hf_torch_test.cpp, titan_replay_test.cpp).
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

// torchtitan's deepseek_v3 debugmodel with the byte tokenizer's vocabulary, as the shipped
// config writes it.
config::ModelConfig debug_model() {
  return config::load_config(std::string(MIXPREC_SOURCE_DIR) + "/configs/deepseek_v3_debug.toml")
      .model;
}

// Small enough to run many times: 4 heads of 6 + 4 (q·k 10 wide), values of `v` wide, a
// 12-wide latent, YaRN from 8 positions (the 20 used here see it), low-rank queries when
// q_lora_rank > 0; one dense block, one with 4 experts.
config::ModelConfig tiny(int64_t q_lora_rank, int64_t v = 6) {
  config::ModelConfig c;
  c.kind = "deepseek_v3";
  c.vocab_size = 20;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_ff = 12;
  c.max_seq_len = 24;
  c.norm_eps = 1e-6;
  c.tie_embeddings = false;
  c.mla = {.q_lora_rank = q_lora_rank,
           .kv_lora_rank = 12,
           .qk_nope_head_dim = 6,
           .qk_rope_head_dim = 4,
           .v_head_dim = v};
  c.rope_scaling.type = "yarn";
  c.rope_scaling.factor = 4;
  c.rope_scaling.original_max_position_embeddings = 8;
  c.rope_scaling.mscale = 1;
  c.rope_scaling.mscale_all_dim = 1;
  c.moe = {.n_experts = 4,
           .top_k = 2,
           .aux_loss_weight = 0,
           .z_loss_weight = 0,
           .score_func = "sigmoid",
           .n_shared_experts = 1,
           .n_dense_layers = 1,
           .dense_d_ff = 20};
  return c;
}

// Latent norm gains away from 1, so that a gradient through them is not a special case.
void spread_gains(ParameterSet& p) {
  for (const auto& [name, param] : p.entries())
    if (name.find("attn.") != std::string::npos && name.ends_with("norm.weight"))
      set_values(p, name,
                 [](std::size_t i, double) { return 0.7 + 0.1 * static_cast<double>(i % 6); });
}

TEST(DeepSeekV3, DebugModelNamesShapesAndRoles) {
  const auto m = make_model(debug_model());
  const ParameterSet& p = m->parameters();
  EXPECT_EQ(p.spec("blocks.0.attn.wq").shape, (Shape{16 * 192, 256}));  // q_lora_rank 0
  EXPECT_EQ(p.spec("blocks.0.attn.wkv_a").shape, (Shape{512 + 64, 256}));
  EXPECT_EQ(p.spec("blocks.0.attn.kv_norm.weight").shape, (Shape{512}));
  EXPECT_EQ(p.spec("blocks.0.attn.wkv_b").shape, (Shape{16 * 256, 512}));
  EXPECT_EQ(p.spec("blocks.0.attn.wo").shape, (Shape{256, 16 * 128}));
  EXPECT_FALSE(p.contains("blocks.0.attn.wk"));
  EXPECT_FALSE(p.contains("blocks.0.attn.wq_a"));
  EXPECT_EQ(p.spec("blocks.0.mlp.w_up").shape, (Shape{1024, 256}));              // the dense block
  EXPECT_EQ(p.spec("blocks.5.moe.experts.w_down").shape, (Shape{8, 256, 256}));  // stacked
  EXPECT_EQ(p.spec("blocks.5.moe.shared_experts.w_gate").shape, (Shape{512, 256}));
  EXPECT_EQ(p.spec("blocks.0.attn.wq").role.heads, 16);  // Adam-mini: a block per head
  EXPECT_EQ(p.spec("blocks.0.attn.wkv_b").role.heads, 16);
  EXPECT_TRUE(p.spec("blocks.0.attn.kv_norm.weight").role.no_weight_decay);
  EXPECT_EQ(p.parameter_count(), 32096512);  // configs/deepseek_v3_debug.toml's 32.1M

  config::ModelConfig c = debug_model();
  c.mla.q_lora_rank = 1536;  // the 236B and 671B flavours
  const auto big = make_model(c);
  const ParameterSet& q = big->parameters();
  EXPECT_EQ(q.spec("blocks.2.attn.wq_a").shape, (Shape{1536, 256}));
  EXPECT_EQ(q.spec("blocks.2.attn.q_norm.weight").shape, (Shape{1536}));
  EXPECT_EQ(q.spec("blocks.2.attn.wq_b").shape, (Shape{16 * 192, 1536}));
  EXPECT_FALSE(q.contains("blocks.2.attn.wq"));
}

// torchtitan's deepseek_v3 init: projections N(0, 0.02), residual outputs, w_up and the router
// N(0, 0.02 / sqrt(2(l + 1))), embedding N(0, 1), output N(0, d^-1/2) cut at 3 std, gains 1.
TEST(DeepSeekV3, InitIsTorchtitans) {
  const auto m = make_model(debug_model());
  const ParameterSet& p = m->parameters();
  auto expect_std = [&](const std::string& name, double std, double cutoff = 0.0) {
    const InitRule r = p.spec(name).init;
    EXPECT_EQ(r.kind, InitKind::normal) << name;
    EXPECT_DOUBLE_EQ(r.std, std) << name;
    EXPECT_EQ(r.cutoff, cutoff) << name;
  };
  for (const char* n :
       {"attn.wq", "attn.wkv_a", "attn.wkv_b", "moe.experts.w_gate", "moe.shared_experts.w_gate"})
    expect_std(std::string("blocks.3.") + n, 0.02);
  const double depth = 0.02 / std::sqrt(2.0 * 4);  // layer 3
  for (const char* n : {"attn.wo", "moe.router", "moe.experts.w_up", "moe.experts.w_down",
                        "moe.shared_experts.w_up", "moe.shared_experts.w_down"})
    expect_std(std::string("blocks.3.") + n, depth);
  expect_std("blocks.0.mlp.w_down", 0.02 / std::sqrt(2.0));
  expect_std("tok_emb.weight", 1.0);
  expect_std("lm_head.weight", 1.0 / 16.0, 3.0);
  for (const char* n :
       {"blocks.3.attn.kv_norm.weight", "blocks.3.attn_norm.weight", "final_norm.weight"})
    EXPECT_EQ(p.spec(n).init.kind, InitKind::ones) << n;
}

TEST(DeepSeekV3, ConfigErrorsNameTheKey) {
  struct Case {
    const char* key;
    void (*change)(config::ModelConfig&);
  };
  const Case cases[] = {
      {"model.mla.q_lora_rank", [](config::ModelConfig& c) { c.mla.q_lora_rank = -1; }},
      {"model.mla.kv_lora_rank", [](config::ModelConfig& c) { c.mla.kv_lora_rank = 0; }},
      {"model.mla.qk_nope_head_dim", [](config::ModelConfig& c) { c.mla.qk_nope_head_dim = -4; }},
      {"model.mla.qk_rope_head_dim", [](config::ModelConfig& c) { c.mla.qk_rope_head_dim = 7; }},
      {"model.mla.qk_rope_head_dim", [](config::ModelConfig& c) { c.mla.qk_rope_head_dim = 0; }},
      {"model.mla.v_head_dim", [](config::ModelConfig& c) { c.mla.v_head_dim = 0; }},
      {"model.mla.kv_lora_rank",
       [](config::ModelConfig& c) { c.mla.kv_lora_rank = int64_t{1} << 25; }},
      {"model.mla.qk_nope_head_dim",
       [](config::ModelConfig& c) { c.mla.qk_nope_head_dim = int64_t{1} << 20; }},
      {"model.mla.kv_lora_rank",
       [](config::ModelConfig& c) {
         c.mla.kv_lora_rank = int64_t{1} << 22;  // wkv_b: 16 x 256 x 2^22 > 2^40 weights
         c.mla.v_head_dim = 65536 - 128;
       }},
      {"model.qk_norm", [](config::ModelConfig& c) { c.qk_norm = true; }},
      {"model.head_dim", [](config::ModelConfig& c) { c.head_dim = 64; }},
      {"model.n_kv_heads", [](config::ModelConfig& c) { c.n_kv_heads = 4; }},
      {"model.norm", [](config::ModelConfig& c) { c.norm = "layernorm"; }},
      {"model.mlp", [](config::ModelConfig& c) { c.mlp = "gelu"; }},
      {"model.positions",
       [](config::ModelConfig& c) {
         c.positions = "learned";
         c.rope_scaling = {};  // which needs RoPE
       }},
      {"model.bias", [](config::ModelConfig& c) { c.bias = true; }},
      {"model.moe.top_k", [](config::ModelConfig& c) { c.moe.top_k = 9; }},  // the MoE's rules
  };
  for (const Case& k : cases) {
    config::ModelConfig c = debug_model();
    k.change(c);
    const std::string e = error_of([&] { make_model(c); });
    EXPECT_NE(e.find("[model] " + std::string(k.key) + " "), std::string::npos)
        << k.key << ": " << e;
  }
  config::ModelConfig c = debug_model();
  c.n_kv_heads = 16;  // = n_heads: accepted
  EXPECT_NO_THROW(make_model(c));
}

// YaRN's correction multiplies the scores by mscale(factor, mscale_all_dim)² and leaves cos/sin
// alone when mscale = mscale_all_dim: a model whose rope parts are zero (wq's and wkv_a's rope
// rows) sees only that factor, so its logits equal those of a model without scaling whose
// nope parts are scaled by mscale.
TEST(DeepSeekV3, YarnScalesTheScoresByMscaleSquared) {
  const config::ModelConfig scaled = tiny(0);
  config::ModelConfig plain = scaled;
  plain.rope_scaling = {};
  auto a = make_model(scaled), b = make_model(plain);
  a->materialize(3, testing::fp32_policy());
  b->materialize(3, testing::fp32_policy());
  const double m = 0.1 * std::log(4.0) + 1.0;  // yarn_get_mscale(4, 1)
  const int64_t qk = 10, nope = 6, r = 12;
  for (ParameterSet* p : {&a->parameters(), &b->parameters()})
    for (int64_t l = 0; l < 2; ++l) {
      const std::string attn = "blocks." + std::to_string(l) + ".attn.";
      // 8x the init, so that attention is far from uniform and its scale shows.
      set_values(*p, attn + "wq",
                 [&](std::size_t i, double v) { return (i / 16) % qk >= nope ? 0.0 : 8 * v; });
      set_values(*p, attn + "wkv_b", [&](std::size_t, double v) { return 8 * v; });
      set_values(*p, attn + "wkv_a", [&](std::size_t i, double v) { return i / 16 >= r ? 0 : v; });
    }
  const Tensor tokens = testing::token_grid(2, 20, 20);
  const Tensor unscaled = logits(*b, tokens);
  for (int64_t l = 0; l < 2; ++l)  // q_nope x m, k_nope x m: scores x m²
    for (const char* n : {"wq", "wkv_b"})
      set_values(b->parameters(), "blocks." + std::to_string(l) + ".attn." + n,
                 [&](std::size_t i, double v) {
                   const bool k_nope = std::string_view(n) == "wkv_b" && (i / 12) % 12 < nope;
                   const bool q_nope = std::string_view(n) == "wq";
                   return q_nope || k_nope ? m * v : v;
                 });
  const Tensor la = logits(*a, tokens);
  expect_close(la, logits(*b, tokens), 1e-5, 1e-5, "yarn's mscale² against scaled nope parts");
  EXPECT_GT(max_abs_diff(la, unscaled), 1e-4);  // the correction matters
}

TEST(DeepSeekV3, GradientsThroughLatentAttentionMatchF64Differences) {
  for (const int64_t q_lora_rank : {0, 8}) {
    SCOPED_TRACE(q_lora_rank);
    // Dense blocks only: the router's f32 logits would be noise to f64 differences. Steps of
    // 1e-5 (not 1e-6): this forward's f64 values carry ~1e-14 of noise, which 1e-6 steps
    // would turn into ~1e-8 of gradient error.
    config::ModelConfig c = tiny(q_lora_rank);
    c.moe.n_dense_layers = c.n_layers;
    auto m = make_model(c);
    m->materialize(6, testing::fp32_policy());
    spread_gains(m->parameters());
    F64Weights f64(m->parameters());
    m->set_unit_hooks(&f64);
    const Tensor tokens = testing::token_grid(2, 5, 20);
    std::vector<std::string> names{"blocks.0.attn.wkv_a", "blocks.0.attn.kv_norm.weight",
                                   "blocks.0.attn.wkv_b", "blocks.1.attn.wo"};
    if (q_lora_rank > 0)
      names.insert(names.end(),
                   {"blocks.0.attn.wq_a", "blocks.0.attn.q_norm.weight", "blocks.1.attn.wq_b"});
    else
      names.push_back("blocks.1.attn.wq");
    std::vector<Tensor> inputs;
    for (const std::string& n : names) inputs.push_back(f64.weight(n));
    mixprec::testing::expect_gradcheck(
        [&](const std::vector<Tensor>&) { return m->forward(tokens); }, inputs,
        "deepseek_v3 through latent attention", 1e-5, 1e-8, 1e-6);
    m->set_unit_hooks(nullptr);
  }
}

// The cache holds each head's full key (nope and the shared rope part) and its value, padded
// to one width: v narrower than q·k (6 < 10) and wider (14 > 10), both query paths.
TEST(DeepSeekV3, DecodingWithTheCacheGivesTheForwardsLogits) {
  for (const auto& [q_lora_rank, v] : {std::pair{0, 6}, std::pair{8, 14}})
    for (const char* precision : {"fp32", "bf16-mixed"}) {
      SCOPED_TRACE(std::string(precision) + ", q rank " + std::to_string(q_lora_rank) + ", v " +
                   std::to_string(v));
      const auto m = make_model(tiny(q_lora_rank, v));
      m->materialize(7, amp::preset(precision));
      amp::ComputeScope scope(amp::preset(precision));
      testing::expect_cached_decoding_matches(*m, testing::token_grid(1, 20, 20),
                                              std::string(precision) == "fp32");
    }
}

// Latent attention's saved bytes (transformer_activations.cpp), for the debug model under
// bf16-mixed: c = 2, a = 4, N = 128 tokens, H = 16, W = H·max(192, 128) = 3072.
TEST(DeepSeekV3, TheEstimateCountsLatentAttention) {
  const auto policy = amp::preset("bf16-mixed");
  const auto m = make_model(debug_model());
  const auto e = m->estimate_activations(policy, 2, 64);
  config::ModelConfig low = debug_model();
  low.mla.q_lora_rank = 1536;
  const auto with_q_lora = make_model(low)->estimate_activations(policy, 2, 64);
  const std::size_t N = 128;
  // wq_a's output and wq_b's cast input, 2 x 2·N·1536, and q_norm's rstd 4·N, per block.
  EXPECT_EQ(with_q_lora.block_saved - e.block_saved, 2 * 2 * N * 1536 + 4 * N);
  // Wider values than q·k widen every padded head: q, k, v (3c) and the f32 output (a).
  config::ModelConfig wide = debug_model();
  wide.mla.v_head_dim = 256;
  const auto w = make_model(wide)->estimate_activations(policy, 2, 64);
  EXPECT_EQ(w.block_saved - e.block_saved, (3 * 2 + 4) * N * 16 * (256 - 192) + 2 * N * 16 * 128);
}

TEST(DeepSeekV3, DescribeNamesTheLatentAttentionAndTheExperts) {
  EXPECT_EQ(make_model(debug_model())->describe(),
            "model: deepseek_v3 | d_model 256 | 6 layers | 16 heads, latent attention (q rank 0, "
            "kv rank 512, nope 128 + rope 64, v 128) | d_ff 256 | rmsnorm | swiglu | rope "
            "positions (theta 10000, yarn x40 from 4096) | vocab 256 | 8 experts, top-3 + 2 "
            "shared, softmax scores unnormalised | first 1 dense (d_ff 1024) | expert bias "
            "balancing 0.001");
}

}  // namespace
}  // namespace mixprec::models
