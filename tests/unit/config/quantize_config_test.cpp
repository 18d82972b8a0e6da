// torchtitan's [quantize.linear.float8] / [quantize.linear.mx] sections and model.converters:
// which recipe the policy gets, and the errors for combinations that cannot run.
#include <gtest/gtest.h>

#include <string>

#include "config_testing.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/config/train_config.h"

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
      "[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n"
      "enable_fsdp_float8_all_gather = true\n");
  EXPECT_TRUE(has(m, "line 3: quantize.linear.float8.enable_fsdp_float8_all_gather") &&
              has(m, "not implemented yet"))
      << m;
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
}

}  // namespace
}  // namespace mixprec::config
