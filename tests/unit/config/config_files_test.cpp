// The shipped configs load, with the values their files spell out (read by hand) and the
// policies their precision keys name.
#include <gtest/gtest.h>

#include "config_testing.h"
#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"

namespace mixprec::config {
namespace {

using testing::repo_config;

amp::MixedPrecisionPolicy bf16_mixed_by_hand() {
  amp::MixedPrecisionPolicy p;
  p.param_dtype = DType::bf16;
  p.compute_dtype = DType::bf16;
  p.reduce_dtype = DType::f32;
  p.output_dtype = DType::f32;
  return p;
}

TEST(ConfigFiles, MoeSmallLoadsAsWritten) {
  const TrainConfig c = load_config(repo_config("moe_small.toml"));
  EXPECT_EQ(c.run_dir, "outputs/moe_small");
  EXPECT_EQ(c.model.kind, "moe");
  EXPECT_EQ(c.model.d_model, 128);
  EXPECT_EQ(c.model.n_layers, 4);
  EXPECT_EQ(c.model.n_heads, 4);
  EXPECT_EQ(c.model.d_ff, 192);
  EXPECT_EQ(c.model.moe.n_experts, 8);
  EXPECT_EQ(c.model.moe.top_k, 2);
  EXPECT_EQ(c.model.moe.capacity_factor, 0.0);
  EXPECT_EQ(c.training.steps, 1500);
  EXPECT_EQ(c.training.batch_size, 16);
  EXPECT_EQ(c.training.seq_len, 128);
  EXPECT_EQ(c.training.precision, "bf16-mixed");
  EXPECT_EQ(c.training.policy, bf16_mixed_by_hand());
  EXPECT_EQ(c.optimizer.name, "adamw");
  EXPECT_EQ(c.optimizer.lr, 1e-3);
  EXPECT_EQ(c.optimizer.beta2, 0.95);
  EXPECT_EQ(c.lr_scheduler.warmup_steps, 100);
  EXPECT_EQ(c.lr_scheduler.decay, "cosine");
  EXPECT_TRUE(c.checkpoint.enable);
  EXPECT_TRUE(c.checkpoint.export_bf16);
  EXPECT_EQ(c.parallelism.data_parallel_shard_degree, -1);
}

TEST(ConfigFiles, MoeSmallIsTheDefaultConfigApartFromOutputs) {
  // The struct's defaults are the README model: the file only adds where outputs go.
  TrainConfig c = load_config(repo_config("moe_small.toml"));
  TrainConfig d;
  d.run_dir = "outputs/moe_small";
  d.training.precision = "bf16-mixed";
  d.checkpoint.enable = true;
  d.checkpoint.export_bf16 = true;
  d.metrics.plot = true;
  EXPECT_EQ(c, d);
}

TEST(ConfigFiles, GptSmallUsesTorchtitanPrecisionKeys) {
  const TrainConfig c = load_config(repo_config("gpt_small.toml"));
  EXPECT_EQ(c.model.kind, "gpt");
  EXPECT_EQ(c.model.n_layers, 6);
  EXPECT_EQ(c.model.d_ff, 512);
  EXPECT_EQ(c.model.norm, "layernorm");
  EXPECT_EQ(c.model.mlp, "gelu");
  EXPECT_EQ(c.model.positions, "learned");
  EXPECT_EQ(c.training.precision, "");
  EXPECT_EQ(c.training.mixed_precision_param, "bfloat16");
  EXPECT_EQ(c.training.mixed_precision_reduce, "float32");
  EXPECT_EQ(c.training.policy, bf16_mixed_by_hand());
}

TEST(ConfigFiles, TinyReadsDumpFolderAndKeepsDefaults) {
  const TrainConfig c = load_config(repo_config("tiny.toml"));
  EXPECT_EQ(c.run_dir, "outputs/tiny");  // from dump_folder
  EXPECT_EQ(c.model.n_layers, 2);
  EXPECT_EQ(c.model.d_model, 64);
  EXPECT_EQ(c.model.moe.n_experts, 4);
  EXPECT_EQ(c.training.steps, 30);
  EXPECT_EQ(c.lr_scheduler.warmup_steps, 5);
  EXPECT_EQ(c.optimizer.lr, 3e-3);
  // Not in the file: the defaults.
  EXPECT_EQ(c.model.vocab_size, 256);
  EXPECT_EQ(c.optimizer.beta1, 0.9);
  EXPECT_EQ(c.model.moe.aux_loss_weight, 0.01);
  EXPECT_FALSE(c.checkpoint.enable);
}

TEST(ConfigFiles, LlamaConfigsDeriveDffAsTorchtitanDoes) {
  const TrainConfig debug = load_config(repo_config("llama3_debug.toml"));
  EXPECT_EQ(debug.model.kind, "llama3");
  EXPECT_EQ(debug.model.d_model, 256);
  EXPECT_EQ(debug.model.n_layers, 8);
  EXPECT_EQ(debug.model.n_heads, 16);
  EXPECT_EQ(debug.model.d_ff, 768);  // round_up(int(2 * 1024 / 3) = 682, 256)
  EXPECT_EQ(debug.model.rope_theta, 500000.0);
  EXPECT_FALSE(debug.model.tie_embeddings);
  const TrainConfig big = load_config(repo_config("llama3_100m.toml"));
  EXPECT_EQ(big.model.n_kv_heads, 4);
  EXPECT_EQ(big.model.d_ff, 2816);  // round_up(int(1.3 * 2048) = 2662, 256)
}

TEST(ConfigFiles, EmptyFileIsTheDefaults) {
  EXPECT_EQ(testing::load_text(""), TrainConfig{});
  EXPECT_EQ(TrainConfig{}.training.policy, bf16_mixed_by_hand());
}

}  // namespace
}  // namespace mixprec::config
