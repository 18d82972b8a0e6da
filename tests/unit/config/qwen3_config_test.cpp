// configs/qwen3_debug.toml is torchtitan's qwen3 debugmodel (with the byte vocabulary) and its
// training config, and model.head_dim / model.qk_norm errors in a file name the line and key.
#include <gtest/gtest.h>

#include <string>

#include "config_testing.h"
#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"
#include "mixprec/models/registry.h"

namespace mixprec::config {
namespace {

using testing::load_error;
using testing::load_text;
using testing::repo_config;

TEST(Qwen3Config, DebugConfigIsTorchtitansDebugModel) {
  const TrainConfig c = load_config(repo_config("qwen3_debug.toml"));
  const ModelConfig& m = c.model;
  EXPECT_EQ(m.kind, "qwen3");
  EXPECT_EQ(m.vocab_size, 256);
  EXPECT_EQ(m.d_model, 256);
  EXPECT_EQ(m.n_layers, 8);
  EXPECT_EQ(m.n_heads, 16);
  EXPECT_EQ(m.n_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.d_ff, 3072);
  EXPECT_EQ(m.norm_eps, 1e-6);
  EXPECT_EQ(m.rope_theta, 1e6);
  EXPECT_TRUE(m.tie_embeddings);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_FALSE(m.bias);
  EXPECT_EQ(c.optimizer.lr, 8e-4);
  EXPECT_EQ(c.optimizer.beta2, 0.95);
  EXPECT_EQ(c.optimizer.weight_decay, 0.1);
  EXPECT_EQ(c.optimizer.weight_decay_params, "all");
  EXPECT_EQ(c.training.policy, amp::preset("bf16-mixed"));
  // V d + L (2·2048·d + 2·1024·d + 3·d·3072 + 2 d + 2·128) + d
  EXPECT_EQ(models::make_model(m)->parameters().parameter_count(), 31'529'216);
}

TEST(Qwen3Config, HeadKeysInAFileNameTheLineAndKey) {
  const std::string head = "[model]\nkind = \"qwen3\"\nqk_norm = true\nd_model = 64\n";
  std::string e = load_error(head + "head_dim = 7\n");
  EXPECT_NE(e.find("line 5: model.head_dim = 7 must be even"), std::string::npos) << e;
  e = load_error(head + "head_dim = -1\n");
  EXPECT_NE(e.find("line 5: model.head_dim = -1 must be >= 0"), std::string::npos) << e;
  e = load_error("[model]\nkind = \"qwen3\"\n");
  EXPECT_NE(e.find("(default) model.qk_norm = false must be true"), std::string::npos) << e;
  // head_dim frees the heads from d_model: 6 heads of 16 beside d_model 64.
  const TrainConfig c = load_text(head + "n_heads = 6\nhead_dim = 16\n");
  EXPECT_EQ(c.model.head_size(), 16);
  e = load_error(head + "n_heads = 6\n");
  EXPECT_NE(e.find("model.n_heads = 6 must divide model.d_model = 64"), std::string::npos) << e;
}

}  // namespace
}  // namespace mixprec::config
