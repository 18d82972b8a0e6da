// to_toml writes what load_config reads back equal: the shipped configs, every field changed
// from its default, strings that need escaping and doubles with long expansions.
#include <gtest/gtest.h>

#include <string>

#include "config_testing.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"

namespace mixprec::config {
namespace {

using testing::load_text;
using testing::repo_config;

TEST(ConfigRoundTrip, ShippedConfigs) {
  for (const char* name : {"tiny.toml", "moe_small.toml", "gpt_small.toml", "llama3_debug.toml",
                           "llama3_100m.toml", "deepseek_moe_debug.toml", "qwen3_debug.toml"}) {
    const TrainConfig c = load_config(repo_config(name));
    EXPECT_EQ(load_text(to_toml(c)), c) << name << "\n" << to_toml(c);
  }
}

TEST(ConfigRoundTrip, EveryFieldAwayFromItsDefault) {
  TrainConfig c;
  c.run_dir = "runs/a \"quoted\" dir\\with\tescapes\nand é";
  c.model = {.kind = "gpt",
             .converters = {"quantize.linear.mx"},
             .vocab_size = 300,
             .d_model = 96,
             .n_layers = 3,
             .n_heads = 6,
             .n_kv_heads = 3,
             .head_dim = 32,  // 6 heads of 32 beside d_model 96
             .d_ff = 320,     // round_up(int(1.25 * int(2 * 384 / 3)), 8)
             .multiple_of = 8,
             .ffn_dim_multiplier = 1.25,
             .max_seq_len = 256,
             .norm = "layernorm",
             .norm_eps = 1e-6,
             .mlp = "gelu",
             .positions = "learned",
             .rope_theta = 1e6,
             .rope_scaling = {},  // learned positions: no RoPE to scale (rope_scaling_config_test)
             .tie_embeddings = false,
             .bias = true,
             .qk_norm = true,
             .tokenizer = "tok/a \"b\".model",
             .moe = {.n_experts = 3,
                     .top_k = 3,
                     .capacity_factor = 1.25,
                     .aux_loss_weight = 0.1 + 0.2,
                     .z_loss_weight = 1e-300,
                     .score_func = "sigmoid",
                     .route_norm = false,
                     .route_scale = 2.5,
                     .n_expert_groups = 3,
                     .n_limited_groups = 3,
                     .n_shared_experts = 2,
                     .n_dense_layers = 1,
                     .dense_d_ff = 100,
                     .load_balance_coeff = 1e-3,
                     .balance_scope = "rank",
                     .idle_experts = "skip"},
             .mla = {.q_lora_rank = 24,
                     .kv_lora_rank = 40,
                     .qk_nope_head_dim = 12,
                     .qk_rope_head_dim = 6,
                     .v_head_dim = 10}};
  c.training.steps = 7;
  c.training.batch_size = 3;
  c.training.local_batch_size = 1;
  c.training.seq_len = 200;
  c.training.seed = 9007199254740993;  // 2^53 + 1: not a double
  c.training.data = "/data/x.txt";
  c.training.val_fraction = 1.0 / 3.0;
  c.training.eval_every = 0;
  c.training.eval_batches = 1;
  c.training.grad_clip = 0;
  c.training.threads = 2;
  c.training.precision = "fp16-mixed";
  c.training.policy = amp::preset("fp16-mixed");
  // The mx section is on (model.converters); float8's keys are read but its section is off.
  c.quantize.float8 = {.recipe_name = "",
                       .filter_fqns = {},
                       .emulate = true,
                       .enable_fsdp_float8_all_gather = false,  // refused while off
                       .precompute_float8_dynamic_scale_for_fsdp = false,
                       .mxfp8_dim1_cast_kernel_choice = "triton"};  // not a float8 key
  c.quantize.mx = {.recipe_name = "mxfp8_cublas_rceil",
                   .filter_fqns = {"lm_head", "blocks.0.attn", "a \"q\""},
                   .emulate = false,
                   .enable_fsdp_float8_all_gather = false,
                   .precompute_float8_dynamic_scale_for_fsdp = false,
                   .mxfp8_dim1_cast_kernel_choice = "cuda"};
  c.training.policy.linear_recipe = &amp::find_linear_recipe("mx", "mxfp8_cublas_rceil", "test");
  c.training.policy.linear_skip = c.quantize.mx.filter_fqns;
  c.optimizer = {.name = "sgd",
                 .lr = 0.123456789012345678,
                 .weight_decay = 0,
                 .weight_decay_params = "all",
                 .beta1 = 0.5,
                 .beta2 = 0.75,
                 .eps = 2.5e-7,
                 .momentum = 0.8,
                 .nesterov = true};
  c.lr_scheduler = {.warmup_steps = 7, .decay = "constant", .min_lr_ratio = 1.0};
  c.checkpoint = {
      .enable = true, .interval = 3, .keep_last = 0, .folder = "ck", .export_bf16 = true};
  c.metrics = {.log_every = 1, .jsonl = false, .plot = true};
  c.parallelism = {.data_parallel_shard_degree = 2, .reshard_after_forward = false};
  c.activation_checkpoint = {.mode = "selective", .selective_ac_option = "op"};
  const std::string text = to_toml(c);
  EXPECT_EQ(load_text(text), c) << text;
  // A few lines checked by hand.
  EXPECT_NE(
      text.find("\nrun_dir = \"runs/a \\\"quoted\\\" dir\\\\with\\u0009escapes\\u000Aand é\"\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("\n[model.moe]\nn_experts = 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nmin_lr_ratio = 1.0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nseed = 9007199254740993\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n[activation_checkpoint]\nmode = \"selective\"\n"
                      "selective_ac_option = \"op\"\n"),
            std::string::npos)
      << text;
}

// torchtitan's spelling: selective_ac_option is a string, "op" or a block period.
TEST(ConfigRoundTrip, ActivationCheckpointSection) {
  EXPECT_EQ(TrainConfig{}.activation_checkpoint.mode, "none");
  EXPECT_EQ(TrainConfig{}.activation_checkpoint.selective_ac_option, "2");
  for (const char* text : {"[activation_checkpoint]\nmode = \"full\"\n",
                           "[activation_checkpoint]\nmode = \"selective\"\n"
                           "selective_ac_option = \"3\"\n"}) {
    const TrainConfig c = load_text(text);
    EXPECT_NE(c.activation_checkpoint, TrainConfig{}.activation_checkpoint) << text;
    EXPECT_EQ(load_text(to_toml(c)), c) << text;
  }
}

TEST(ConfigRoundTrip, TorchtitanPrecisionPair) {
  TrainConfig c = load_text(
      "[training]\nmixed_precision_param = \"float16\"\nmixed_precision_reduce = \"float32\"\n");
  EXPECT_EQ(c.training.policy, amp::parse_policy("params=f16,compute=f16,reduce=f32,output=f32"));
  EXPECT_EQ(load_text(to_toml(c)), c);
}

TEST(ConfigRoundTrip, DeepSeekMoeKeys) {
  const TrainConfig c = load_config(repo_config("deepseek_moe_debug.toml"));
  EXPECT_EQ(c.model.moe.n_shared_experts, 2);
  EXPECT_EQ(c.model.moe.n_dense_layers, 1);
  EXPECT_EQ(c.model.moe.dense_d_ff, 1024);
  EXPECT_FALSE(c.model.moe.route_norm);
  EXPECT_EQ(c.model.moe.load_balance_coeff, 1e-3);
  TrainConfig d = c;
  d.model.moe.score_func = "sigmoid";
  d.model.moe.n_expert_groups = 4;
  d.model.moe.n_limited_groups = 2;
  d.model.moe.route_scale = 2.5;
  d.model.moe.balance_scope = "rank";
  EXPECT_EQ(load_text(to_toml(d)), d);
  EXPECT_NE(d, c);
}

TEST(ConfigRoundTrip, GlobalBatchSizeIsBatchSize) {
  const TrainConfig c = load_text("[training]\nglobal_batch_size = 32\nlocal_batch_size = 8\n");
  EXPECT_EQ(c.training.batch_size, 32);
  EXPECT_EQ(c.training.local_batch_size, 8);
  EXPECT_EQ(load_text(to_toml(c)), c);
}

TEST(ConfigRoundTrip, DefaultsAndEquality) {
  EXPECT_EQ(load_text(to_toml(TrainConfig{})), TrainConfig{});
  TrainConfig a, b;
  b.model.moe.z_loss_weight = 0.002;
  EXPECT_NE(a, b);
  b = a;
  b.training.policy.loss_scaling = true;
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace mixprec::config
