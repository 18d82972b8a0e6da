// torchtitan's [quantize.linear.float8] / [quantize.linear.mx] sections and model.converters:
// which recipe the policy gets, and the errors for combinations that cannot run.
#include <gtest/gtest.h>

#include <string>

#include "config_testing.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/config/train_config.h"
#include "mixprec/numerics/accumulator_model.h"

namespace mixprec::config {
namespace {

using testing::load_error;
using testing::load_text;

const char* recipe_of(const TrainConfig& c) {
  return c.training.policy.linear_recipe ? c.training.policy.linear_recipe->name : "(none)";
}

TEST(QuantizeConfig, ASectionWithARecipeNameTurnsItOn) {
  const TrainConfig c = load_text("[quantize.linear.float8]\nrecipe_name = \"rowwise\"\n");
  EXPECT_STREQ(recipe_of(c), "rowwise");
  EXPECT_EQ(c.training.policy.linear_skip, (std::vector<std::string>{"lm_head"}));
  EXPECT_EQ(amp::display_name(c.training.policy), "rowwise");
  EXPECT_EQ(load_text(to_toml(c)), c);
}

TEST(QuantizeConfig, ConvertersSwitchOnTorchtitansDefaultRecipes) {
  EXPECT_STREQ(recipe_of(load_text("[model]\nconverters = [\"quantize.linear.float8\"]\n")),
               "tensorwise");
  const TrainConfig mx = load_text(
      "[model]\nconverters = [\"quantize.linear.mx\"]\n"
      "[quantize.linear.mx]\nfilter_fqns = [\"lm_head\", \"auto_filter_small_kn\"]\n");
  EXPECT_STREQ(recipe_of(mx), "mxfp8_cublas");
  EXPECT_EQ(mx.training.policy.linear_skip.size(), 2u);
  // Keys of a section that is off are read, not applied (as torchtitan).
  EXPECT_STREQ(recipe_of(load_text("[quantize.linear.float8]\nemulate = true\n")), "(none)");
  EXPECT_STREQ(recipe_of(load_text("", {"training.precision=deepseek_v3"})), "deepseek_v3");
}

TEST(QuantizeConfig, OverridesTakeLists) {
  const TrainConfig c = load_text("", {"quantize.linear.float8.recipe_name=tensorwise",
                                       "quantize.linear.float8.filter_fqns=lm_head, router"});
  EXPECT_EQ(c.training.policy.linear_skip, (std::vector<std::string>{"lm_head", "router"}));
  EXPECT_TRUE(load_text("", {"quantize.linear.float8.recipe_name=rowwise",
                             "quantize.linear.float8.filter_fqns=[]"})
                  .training.policy.linear_skip.empty());
}

TEST(QuantizeConfig, CombinationsThatCannotRunNameTheKey) {
  const auto has = [](const std::string& m, const char* part) {
    return m.find(part) != std::string::npos;
  };
  std::string m = load_error(
      "[quantize.linear.float8]\nrecipe_name = \"rowwise\"\n"
      "[quantize.linear.mx]\nrecipe_name = \"mxfp8_cublas\"\n");
  EXPECT_TRUE(has(m, "quantize.linear.mx.recipe_name") && has(m, "one converter")) << m;
  m = load_error("[quantize.linear.float8]\nrecipe_name = \"mxfp8_cublas\"\n");
  EXPECT_TRUE(has(m, "line 2: quantize.linear.float8.recipe_name") &&
              has(m, "is not a float8 recipe") && has(m, "rowwise_with_gw_hp"))
      << m;
  m = load_error(
      "[quantize.linear.float8]\nrecipe_name = \"te_delayed\"\n"
      "enable_fsdp_float8_all_gather = true\n");
  EXPECT_TRUE(has(m, "line 3: quantize.linear.float8.enable_fsdp_float8_all_gather") &&
              has(m, "tensorwise, rowwise, rowwise_with_gw_hp, te_current") &&
              has(m, "te_delayed casts with amax histories"))
      << m;
  m = load_error(
      "[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n"
      "precompute_float8_dynamic_scale_for_fsdp = true\n");
  EXPECT_TRUE(has(m, "precompute_float8_dynamic_scale_for_fsdp") &&
              has(m, "without enable_fsdp_float8_all_gather"))
      << m;
  m = load_error(
      "[training]\nprecision = \"param=f32,compute=bf16\"\n[quantize.linear.float8]\n"
      "recipe_name = \"tensorwise\"\nenable_fsdp_float8_all_gather = true\n");
  EXPECT_TRUE(has(m, "enable_fsdp_float8_all_gather") && has(m, "param dtype to be the compute"))
      << m;
  m = load_error(
      "[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\naccumulator = \"a100\"\n");
  EXPECT_TRUE(has(m, "line 3: quantize.linear.float8.accumulator") &&
              has(m, "is not an accumulator; valid: f32, h100"))
      << m;
  const TrainConfig acc =
      load_text("[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\naccumulator = \"h100\"\n");
  EXPECT_EQ(acc.training.policy.accumulator, find_accumulator("h100", "test"));
  EXPECT_EQ(load_text(to_toml(acc)), acc);
  EXPECT_EQ(load_text("[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n")
                .training.policy.accumulator,
            nullptr);
  m = load_error(
      "[quantize.linear.float8]\nrecipe_name = \"rowwise_with_gw_hp\"\nsave_fp8_activations = "
      "true\n");
  EXPECT_TRUE(has(m, "line 3: quantize.linear.float8.save_fp8_activations") &&
              has(m, "runs grad_weight in high precision"))
      << m;
  const TrainConfig saved =
      load_text("[quantize.linear.mx]\nrecipe_name = \"mxfp8\"\nsave_fp8_activations = true\n");
  EXPECT_TRUE(saved.training.policy.save_fp8_activations);
  EXPECT_EQ(load_text(to_toml(saved)), saved);
  EXPECT_EQ(amp::parse_policy(amp::to_string(saved.training.policy)), saved.training.policy);
  EXPECT_THROW(amp::parse_policy("compute=bf16,linear=te_delayed,save_fp8_activations=true"),
               Error);
  for (const char* key : {"enable_fsdp_float8_all_gather = true", "save_fp8_activations = true",
                          "accumulator = \"h100\""}) {
    m = load_error(
        std::string("[training]\nprecision = \"tensorwise\"\n[quantize.linear.float8]\n") + key +
        "\n");
    EXPECT_TRUE(has(m, "line 4: quantize.linear.float8.") && has(m, "is off")) << m;
  }
  const TrainConfig ag = load_text(
      "[quantize.linear.float8]\nrecipe_name = \"deepseek_v3\"\n"
      "enable_fsdp_float8_all_gather = true\nprecompute_float8_dynamic_scale_for_fsdp = true\n");
  EXPECT_TRUE(ag.quantize.float8.enable_fsdp_float8_all_gather);
  EXPECT_EQ(load_text(to_toml(ag)), ag);
  m = load_error(
      "[training]\nprecision = \"fp32\"\n[quantize.linear.mx]\nrecipe_name = \"mxfp8\"\n");
  EXPECT_TRUE(has(m, "needs a bf16 or f16 compute dtype") && has(m, "fp32")) << m;
  m = load_error(
      "[training]\nprecision = \"rowwise\"\n[quantize.linear.float8]\nrecipe_name = \"rowwise\"\n");
  EXPECT_TRUE(has(m, "training.precision") && has(m, "use one")) << m;
  m = load_error("[quantize.linear.float8]\nfilter_fqns = [1, 2]\n");
  EXPECT_TRUE(has(m, "must be a list of strings")) << m;
  m = load_error("[model]\nconverters = [\"float8\"]\n");
  EXPECT_TRUE(has(m, "model.converters") && has(m, "'float8'") && has(m, "quantize.linear.mx"))
      << m;
  m = load_error("[quantize.linear.float8]\nrecipe_name = \"rowwise\"\nfilter_fqns = [\"\"]\n");
  EXPECT_TRUE(has(m, "empty module name")) << m;
}

// Transformer Engine's NVFP4 in the mx section, and what it cannot do yet: gather weights in
// FP4 (a tensor-wide scale), save its inputs in FP4 (grad_weight's own Hadamard cast), or run
// under the FP8 accumulator model (no product sums in it; MX's neither).
TEST(QuantizeConfig, TeNvfp4IsAnMxRecipeWithItsRefusals) {
  const auto has = [](const std::string& m, const char* part) {
    return m.find(part) != std::string::npos;
  };
  const TrainConfig c = load_text("[quantize.linear.mx]\nrecipe_name = \"nvfp4\"\n");
  EXPECT_STREQ(recipe_of(c), "te_nvfp4");
  EXPECT_EQ(load_text(to_toml(c)), c);
  EXPECT_STREQ(recipe_of(load_text("", {"training.precision=te_nvfp4"})), "te_nvfp4");
  std::string m = load_error("[quantize.linear.float8]\nrecipe_name = \"te_nvfp4\"\n");
  EXPECT_TRUE(has(m, "is not a float8 recipe")) << m;
  m = load_error(
      "[quantize.linear.mx]\nrecipe_name = \"te_nvfp4\"\nenable_fsdp_float8_all_gather = true\n");
  EXPECT_TRUE(has(m, "line 3: quantize.linear.mx.enable_fsdp_float8_all_gather") &&
              has(m, "te_nvfp4 casts the weight under a tensor-wide NVFP4 scale"))
      << m;
  m = load_error("[quantize.linear.mx]\nrecipe_name = \"te_nvfp4\"\nsave_fp8_activations = true\n");
  EXPECT_TRUE(has(m, "line 3: quantize.linear.mx.save_fp8_activations") &&
              has(m, "through the Hadamard transform"))
      << m;
  for (const char* recipe : {"te_nvfp4", "mxfp8_cublas"}) {
    m = load_error("", {std::string("training.precision=compute=bf16,linear=") + recipe +
                        ",accumulator=h100"});
    EXPECT_TRUE(has(m, "accumulator models the FP8 tensor cores' accumulator")) << m;
  }
  EXPECT_THROW(amp::parse_policy("compute=bf16,linear=te_nvfp4,save_fp8_activations=true"), Error);
}

TEST(QuantizeConfig, PrecisionSpellingsNameRecipes) {
  const amp::MixedPrecisionPolicy p = amp::parse_policy("rowwise");
  EXPECT_EQ(amp::parse_policy(amp::to_string(p)), p);
  EXPECT_NE(amp::to_string(p).find("linear=rowwise,linear_skip=lm_head"), std::string::npos);
  const amp::MixedPrecisionPolicy q =
      amp::parse_policy("params=bf16,compute=bf16,reduce=f32,linear=mxfp8_rceil,linear_skip=");
  EXPECT_STREQ(q.linear_recipe->name, "mxfp8_cublas_rceil");
  EXPECT_TRUE(q.linear_skip.empty());
  EXPECT_EQ(amp::parse_policy(amp::to_string(q)), q);
  EXPECT_THROW(amp::parse_policy("linear=rowwise"), Error);  // compute f32
  EXPECT_THROW(amp::parse_policy("compute=bf16,linear_skip=lm_head"), Error);
  // The GPU accumulator: a key of the spelling, round-tripped; meaningless without a recipe.
  const amp::MixedPrecisionPolicy h =
      amp::parse_policy("compute=bf16,linear=tensorwise,accumulator=H100");
  EXPECT_EQ(h.accumulator, find_accumulator("h100", "test"));
  EXPECT_NE(amp::to_string(h).find(",accumulator=h100"), std::string::npos) << amp::to_string(h);
  EXPECT_EQ(amp::parse_policy(amp::to_string(h)), h);
  EXPECT_THROW(amp::parse_policy("compute=bf16,accumulator=h100"), Error);
  EXPECT_THROW(amp::parse_policy("compute=bf16,linear=tensorwise,accumulator=b200"), Error);
}

const char* grouped_of(const TrainConfig& c) {
  return c.training.policy.grouped_recipe ? c.training.policy.grouped_recipe->name : "(none)";
}

TEST(QuantizeConfig, GroupedSectionsGiveTheExpertsRecipe) {
  const TrainConfig f = load_text("[quantize.grouped_mm.float8]\nfqns = [\"experts\"]\n");
  EXPECT_STREQ(grouped_of(f), "rowwise");
  EXPECT_STREQ(recipe_of(f), "(none)");  // the linears keep bf16
  EXPECT_EQ(f.training.policy.grouped_fqns, (std::vector<std::string>{"experts"}));
  EXPECT_EQ(load_text(to_toml(f)), f);
  const TrainConfig mx = load_text(
      "[model]\nconverters = [\"quantize.linear.mx\", \"quantize.grouped_mm.mx\"]\n"
      "[quantize.grouped_mm.mx]\nrecipe_name = \"mxfp8\"\nfqns = [\"experts\"]\n");
  EXPECT_STREQ(grouped_of(mx), "mxfp8_cublas_rceil");  // torchao's MoE MXFP8 is RCEIL
  EXPECT_STREQ(recipe_of(mx), "mxfp8_cublas");
  EXPECT_STREQ(grouped_of(load_text("", {"quantize.grouped_mm.float8.fqns=experts"})), "rowwise");
}

// [quantize.linear.mx] takes the FSDP gather keys too (MX weights gather as two casts).
TEST(QuantizeConfig, TheMxSectionEnablesTheFp8AllGather) {
  const TrainConfig c = load_text(
      "[quantize.linear.mx]\nrecipe_name = \"mxfp8_cublas\"\n"
      "enable_fsdp_float8_all_gather = true\nprecompute_float8_dynamic_scale_for_fsdp = true\n");
  EXPECT_TRUE(c.quantize.mx.enable_fsdp_float8_all_gather);
  EXPECT_TRUE(c.quantize.mx.precompute_float8_dynamic_scale_for_fsdp);
  EXPECT_EQ(load_text(to_toml(c)), c);
}

// The grouped section's save_fp8_activations saves the experts' inputs only; the linear
// section's the dense linears' only.
TEST(QuantizeConfig, EachSectionsSaveFp8ActivationsSavesItsOwnProducts) {
  const TrainConfig g = load_text(
      "[quantize.grouped_mm.float8]\nfqns = [\"experts\"]\nsave_fp8_activations = true\n");
  EXPECT_TRUE(g.training.policy.save_fp8_grouped_activations);
  EXPECT_FALSE(g.training.policy.save_fp8_activations);
  const TrainConfig l = load_text(
      "[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\nsave_fp8_activations = true\n"
      "[quantize.grouped_mm.float8]\nfqns = [\"experts\"]\n");
  EXPECT_TRUE(l.training.policy.save_fp8_activations);
  EXPECT_FALSE(l.training.policy.save_fp8_grouped_activations);
  const std::string m = load_error("[quantize.grouped_mm.mx]\nsave_fp8_activations = true\n");
  EXPECT_NE(m.find("quantize.grouped_mm.mx.save_fp8_activations"), std::string::npos) << m;
  EXPECT_NE(m.find("is off"), std::string::npos) << m;
}

TEST(QuantizeConfig, GroupedCombinationsThatCannotRunNameTheKey) {
  const auto has = [](const std::string& m, const char* part) {
    return m.find(part) != std::string::npos;
  };
  std::string m = load_error("[model]\nconverters = [\"quantize.grouped_mm.float8\"]\n");
  EXPECT_TRUE(has(m, "quantize.grouped_mm.float8.fqns") && has(m, "is empty")) << m;
  m = load_error(
      "[quantize.grouped_mm.float8]\nfqns = [\"experts\"]\n"
      "[quantize.grouped_mm.mx]\nfqns = [\"experts\"]\n");
  EXPECT_TRUE(has(m, "quantize.grouped_mm.mx.fqns") && has(m, "one recipe")) << m;
  m = load_error("[quantize.grouped_mm.float8]\nrecipe_name = \"tensorwise\"\nfqns = [\"e\"]\n");
  EXPECT_TRUE(has(m, "line 2: quantize.grouped_mm.float8.recipe_name") &&
              has(m, "not a grouped float8 recipe; valid: rowwise"))
      << m;
  m = load_error(
      "[training]\nprecision = \"fp32\"\n[quantize.grouped_mm.mx]\nfqns = [\"experts\"]\n");
  EXPECT_TRUE(has(m, "needs a bf16 or f16 compute dtype")) << m;
  m = load_error("[quantize.grouped_mm.mx]\nfqns = [\"\"]\n");
  EXPECT_TRUE(has(m, "empty module name")) << m;
}

TEST(QuantizeConfig, PrecisionSpellingsNameGroupedRecipes) {
  const amp::MixedPrecisionPolicy p = amp::parse_policy("compute=bf16,grouped=rowwise");
  EXPECT_STREQ(p.grouped_recipe->name, "rowwise");
  EXPECT_EQ(p.grouped_fqns, (std::vector<std::string>{"experts"}));
  EXPECT_EQ(p.linear_recipe, nullptr);
  EXPECT_EQ(amp::parse_policy(amp::to_string(p)), p);
  const amp::MixedPrecisionPolicy q = amp::parse_policy(
      "compute=bf16,linear=rowwise,grouped=mxfp8_rceil,grouped_fqns=experts.0|experts.1");
  EXPECT_EQ(q.grouped_fqns.size(), 2u);
  EXPECT_EQ(amp::parse_policy(amp::to_string(q)), q);
  // grouped=mxfp8 is torchtitan's [quantize.grouped_mm.mx] recipe_name "mxfp8" (RCEIL), not
  // the linear alias mxfp8 (FLOOR); a linear recipe's own name still works.
  EXPECT_STREQ(amp::parse_policy("compute=bf16,grouped=mxfp8").grouped_recipe->name,
               "mxfp8_cublas_rceil");
  EXPECT_STREQ(amp::parse_policy("compute=bf16,grouped=mxfp8_cublas").grouped_recipe->name,
               "mxfp8_cublas");
  EXPECT_THROW(amp::parse_policy("grouped=rowwise"), Error);  // compute f32
  EXPECT_THROW(amp::parse_policy("compute=bf16,grouped_fqns=experts"), Error);
  EXPECT_THROW(amp::parse_policy("compute=bf16,grouped=rowwise,grouped_fqns="), Error);
}

TEST(QuantizeConfig, DelayedScalingKeysAreTeDelayedsAndInRange) {
  const TrainConfig c = load_text(
      "[quantize.linear.float8]\nrecipe_name = \"te_delayed\"\namax_history_len = 16\n"
      "amax_compute_algo = \"most_recent\"\nmargin = 1\n");
  EXPECT_STREQ(recipe_of(c), "te_delayed");
  EXPECT_EQ(load_text(to_toml(c)), c);
  std::string m = load_error("[quantize.linear.float8]\nrecipe_name = \"rowwise\"\nmargin = 2\n");
  EXPECT_NE(m.find("line 3: quantize.linear.float8.margin = 2 is read by the delayed recipe "
                   "te_delayed only; the linear recipe is rowwise"),
            std::string::npos)
      << m;
  m = load_error("[quantize.linear.float8]\nrecipe_name = \"te_delayed\"\namax_history_len = 0\n");
  EXPECT_NE(m.find("amax_history_len = 0 must be in [1, 1048576]"), std::string::npos) << m;
  m = load_error(
      "[quantize.linear.float8]\nrecipe_name = \"te_delayed\"\namax_compute_algo = \"mean\"\n");
  EXPECT_NE(m.find("amax_compute_algo"), std::string::npos) << m;
}

}  // namespace
}  // namespace mixprec::config
