// Overrides "section.key=value" apply after the file, parsed by the key's type, and go
// through the same checks as the file.
#include <gtest/gtest.h>

#include <string>

#include "config_testing.h"
#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"

namespace mixprec::config {
namespace {

using testing::load_error;
using testing::load_text;
using testing::repo_config;

TEST(ConfigOverrides, ApplyByType) {
  const TrainConfig c =
      load_config(repo_config("tiny.toml"),
                  {"training.steps=12", "model.moe.top_k=1", "optimizer.lr=2.5e-4",
                   "model.tie_embeddings=false", "model.kind=gpt", "training.data=\"/tmp/a b.txt\"",
                   "checkpoint.folder='ck'", " metrics.log_every = 3 ", "run_dir=out/x",
                   "optimizer.weight_decay=0"});
  EXPECT_EQ(c.training.steps, 12);
  EXPECT_EQ(c.model.moe.top_k, 1);
  EXPECT_EQ(c.optimizer.lr, 2.5e-4);
  EXPECT_FALSE(c.model.tie_embeddings);
  EXPECT_EQ(c.model.kind, "gpt");
  EXPECT_EQ(c.training.data, "/tmp/a b.txt");
  EXPECT_EQ(c.checkpoint.folder, "ck");
  EXPECT_EQ(c.metrics.log_every, 3);
  EXPECT_EQ(c.run_dir, "out/x");
  EXPECT_EQ(c.optimizer.weight_decay, 0.0);
  EXPECT_EQ(c.model.d_model, 64);  // untouched keys keep the file's values
}

TEST(ConfigOverrides, LaterOverrideWinsAndPolicyIsResolvedAfter) {
  const TrainConfig c =
      load_text("[training]\nprecision = \"fp32\"\n",
                {"training.precision=bf16-mixed", "training.precision=fp16-mixed"});
  EXPECT_EQ(c.training.precision, "fp16-mixed");
  EXPECT_EQ(c.training.policy, amp::preset("fp16-mixed"));
  EXPECT_EQ(load_text("", {"dump_folder=d"}).run_dir, "d");
}

TEST(ConfigOverrides, TypeChecked) {
  struct Case {
    const char* override_text;
    const char* expect;
  };
  for (const Case& k : {
           Case{"training.steps=ten", "training.steps = ten must be an integer"},
           Case{"training.steps=1.5", "training.steps = 1.5 must be an integer"},
           Case{"training.steps=", "training.steps =  must be an integer"},
           Case{"optimizer.lr=fast", "optimizer.lr = fast must be a number"},
           Case{"optimizer.lr=inf", "optimizer.lr = inf must be a number"},
           Case{"model.tie_embeddings=yes", "model.tie_embeddings = yes must be a boolean"},
           Case{"model.tie_embeddings=1", "model.tie_embeddings = 1 must be a boolean"},
       }) {
    const std::string msg = load_error("", {k.override_text});
    EXPECT_NE(msg.find("mixprec_cfg_ConfigOverrides_TypeChecked.toml"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("override '") + k.override_text + "'"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(k.expect), std::string::npos) << msg;
  }
}

TEST(ConfigOverrides, RangeErrorsNameTheOverride) {
  const std::string msg = load_error("[model.moe]\nn_experts = 4\n", {"model.moe.top_k=5"});
  EXPECT_NE(msg.find("override 'model.moe.top_k=5': model.moe.top_k = 5 must be <= "
                     "model.moe.n_experts = 4"),
            std::string::npos)
      << msg;
}

TEST(ConfigOverrides, UnknownKeysAndBadSyntax) {
  std::string msg = load_error("", {"training.stepz=3"});
  EXPECT_NE(msg.find("unknown key 'training.stepz'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("valid keys of [training]: steps, batch_size, seq_len"), std::string::npos)
      << msg;
  msg = load_error("", {"model.mo.top_k=3"});
  EXPECT_NE(msg.find("unknown section [model.mo]; valid sections: model, model.moe, "
                     "model.mla, model.rope_scaling, training"),
            std::string::npos)
      << msg;
  msg = load_error("", {"training.steps"});
  EXPECT_NE(msg.find("override 'training.steps': expected section.key=value"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace mixprec::config
