// [model.rope_scaling] and [optimizer] weight_decay_params: the keys, Hugging Face's
// rope_type spelling, the round trip through to_toml, and errors that name the key and line.
#include <gtest/gtest.h>

#include <string>

#include "config_testing.h"
#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"

namespace mixprec::config {
namespace {

using testing::load_error;
using testing::load_text;

constexpr const char* kLlama31 =
    "[model]\nkind = \"llama3\"\n"
    "[model.rope_scaling]\nrope_type = \"llama3\"\nfactor = 8.0\nlow_freq_factor = 1.0\n"
    "high_freq_factor = 4.0\noriginal_max_position_embeddings = 8192\n";

TEST(ConfigRopeScaling, NoneByDefaultAndReadAsHuggingFaceSpellsIt) {
  EXPECT_EQ(load_text("").model.rope_scaling.type, "none");
  const TrainConfig c = load_text(kLlama31);
  EXPECT_EQ(c.model.rope_scaling.type, "llama3");  // rope_type is read as type
  EXPECT_EQ(c.model.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.model.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(load_text(to_toml(c)), c);
}

TEST(ConfigRopeScaling, YarnKeysRoundTrip) {
  const TrainConfig c = load_text(
      "[model.rope_scaling]\ntype = \"yarn\"\nfactor = 40.0\nbeta_fast = 32.0\nbeta_slow = 1.0\n"
      "mscale = 0.707\nmscale_all_dim = 0.707\noriginal_max_position_embeddings = 4096\n"
      "truncate = false\n");
  EXPECT_EQ(c.model.rope_scaling.mscale, 0.707);
  EXPECT_FALSE(c.model.rope_scaling.truncate);
  EXPECT_EQ(load_text(to_toml(c)), c);
}

TEST(ConfigRopeScaling, BadValuesNameTheKeyAndLine) {
  struct Case {
    std::string toml, expect;
  };
  for (const Case& k : {
           Case{"[model.rope_scaling]\ntype = \"llama3\"\nfactor = 0.5\n"
                "original_max_position_embeddings = 8192\n",
                "line 3: model.rope_scaling.factor = 0.5 must be >= 1 and finite"},
           Case{"[model.rope_scaling]\ntype = \"llama3\"\nfactor = 8.0\n",
                "model.rope_scaling.original_max_position_embeddings = 0 must be > 0"},
           Case{"[model.rope_scaling]\ntype = \"llama3\"\nfactor = 8.0\nlow_freq_factor = 4.0\n"
                "original_max_position_embeddings = 8192\n",
                "model.rope_scaling.high_freq_factor = 4.0 must be > low_freq_factor = 4"},
           Case{"[model.rope_scaling]\ntype = \"yarn\"\nfactor = 4.0\nbeta_slow = 64.0\n",
                "(default) model.rope_scaling.beta_fast = 32.0 must be >= beta_slow = 64"},
           Case{"[model.rope_scaling]\ntype = \"none\"\nattention_factor = 1.5\n",
                "line 3: model.rope_scaling.attention_factor = 1.5 applies to rope_type \"yarn\""},
           Case{"[model]\npositions = \"learned\"\n[model.rope_scaling]\ntype = \"yarn\"\n"
                "factor = 4.0\n",
                "line 4: model.rope_scaling.type = \"yarn\" needs model.positions = \"rope\""},
           Case{"[model.rope_scaling]\ntype = \"dynamic\"\n",
                "model.rope_scaling.type = \"dynamic\" is not one of: none, llama3, yarn"},
           Case{"[optimizer]\nweight_decay_params = \"norms\"\n",
                "line 2: optimizer.weight_decay_params = \"norms\" is not one of: matrices, all"},
       }) {
    const std::string error = load_error(k.toml);
    EXPECT_NE(error.find(k.expect), std::string::npos) << k.toml << "\n-> " << error;
  }
}

TEST(ConfigWeightDecayParams, MatricesByDefaultAllAsTorchtitan) {
  EXPECT_EQ(load_text("").optimizer.weight_decay_params, "matrices");
  const TrainConfig c = load_text("[optimizer]\nweight_decay_params = \"all\"\n");
  EXPECT_EQ(c.optimizer.weight_decay_params, "all");
  EXPECT_EQ(load_text(to_toml(c)), c);
}

}  // namespace
}  // namespace mixprec::config
