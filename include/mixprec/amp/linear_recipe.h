// Low-precision recipes for a linear layer's three products, one table line per recipe, each
// named and spelled after its source. Every product is the scaled GEMM C = A·Bᵀ of
// backend/quantized.h with both operands laid out [rows, contraction]:
//   output       Y  = X·Wᵀ    A = X  [tokens, in],  B = W  [out, in]
//   grad_input   dX = dY·W    A = dY [tokens, out], B = Wᵀ [in, out]
//   grad_weight  dW = dYᵀ·X   A = dYᵀ [out, tokens], B = Xᵀ [in, tokens]
// so a "row" scale is always one per row along that product's contraction dim (torchao's
// axiswise dim). Each operand is quantized from the high-precision tensor the linear saved
// (torchao and Transformer Engine do the same: no FP8 tensor is transposed and reused), and
// a product that is not FP8 runs as today's autocast GEMM.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "mixprec/backend/quantized.h"

namespace mixprec::amp {

struct ProductRecipe {
  bool fp8 = false;  // false: the product runs in the compute dtype, as under plain autocast
  backend::QuantSpec a, b;
  // The source's GPU kernel sums this product in the tensor core's accumulator without
  // promoting partial sums to f32 within a K-step (torchao's use_fast_accum, on the output
  // product only; TE's fprop; DeepGEMM's 128-product blocks): the products a GPU accumulator
  // model (policy `accumulator`) applies to. The others are taken as exact f32 sums.
  bool fast_accum = false;
};

// torchao's auto_filter_small_kn: the linears too small for FP8 to pay on an H100, by the
// recipe's thresholds (torchao float8_linear_utils.py); none for recipes torchao has no rule for.
enum class SmallLinearRule : uint8_t { none, tensorwise, rowwise };

struct LinearRecipe {
  const char* name;
  const char* aliases;  // comma-separated other spellings (torchao's and torchtitan's)
  const char* section;  // the config section that names it: "float8" or "mx"
  const char* source;
  ProductRecipe output, grad_input, grad_weight;
  SmallLinearRule small_rule = SmallLinearRule::none;
  // Transformer Engine's delayed scaling (amp/delayed_scaling.h): every operand is tensorwise
  // and cast with the scale its amax history gives, not one from its own amax.
  bool delayed = false;
};

// The recipes, in table order (README, "FP8 and MX training").
std::span<const LinearRecipe> linear_recipes();
// The recipe of `section` called `name` (or an alias); throws mixprec::Error naming `where`
// and listing the section's names.
const LinearRecipe& find_linear_recipe(std::string_view section, std::string_view name,
                                       std::string_view where);
// The recipe of any section called `name` or with that alias; null when there is none.
const LinearRecipe* find_any_linear_recipe(std::string_view name);
// "tensorwise, rowwise, ...": the names of the section's recipes ("" = every section's).
std::string linear_recipe_names(std::string_view section = "");
// torchtitan's [quantize.grouped_mm.float8] / [quantize.grouped_mm.mx] name the recipe of MoE
// experts' grouped GEMMs (torchao's moe_training); each is a linear recipe of the table run on
// every group as its own product (per-group scales, as torchao's jagged ones over each group's
// tokens).
struct GroupedRecipe {
  const char* name;
  const char* aliases;
  const char* section;
  const char* linear;  // the linear recipe each group runs
  const char* source;
};
std::span<const GroupedRecipe> grouped_recipes();
// The linear recipe a grouped section's `name` (or alias) gives; null when there is none.
const LinearRecipe* find_grouped_recipe(std::string_view section, std::string_view name);
std::string grouped_recipe_names(std::string_view section);

// The entry of filter_fqns that switches on auto_filter_small_kn (torchtitan's spelling).
inline constexpr const char* kAutoFilterSmallKn = "auto_filter_small_kn";
// True when auto_filter_small_kn keeps a linear of weight [out, in] in high precision.
bool too_small_for_fp8(SmallLinearRule rule, int64_t out, int64_t in);
// Whether recipe r runs the linear at module `path` with weight [out, in], given its skip list
// (filter_fqns: substrings of the path, and auto_filter_small_kn). torchtitan's module filter
// also keeps dims that are not multiples of 16 (the FP8 GEMM kernels' alignment) in high
// precision, whatever the recipe.
bool recipe_converts(const LinearRecipe& r, std::span<const std::string> skip,
                     std::string_view path, int64_t out, int64_t in);
// Whether a grouped GEMM's group at module `path` with weight [out, in] runs by grouped recipe
// r: torchtitan converts the MoE modules its fqns name (substrings of the path, an inclusion
// list) and nothing else; the 16-multiple rule holds as for linears.
bool grouped_recipe_converts(const LinearRecipe& r, std::span<const std::string> fqns,
                             std::string_view path, int64_t out, int64_t in);
// True when one FP8 copy of a weight serves both products that read it: grad_input's Wᵀ is
// quantized with output's W blocks transposed (tensorwise, 128x128), so a weight cast once
// (FSDP's FP8 all-gather) is exact for both. Row scales and 1x32 blocks run along the other
// dim in grad_input and need a second cast.
bool weight_cast_serves_both_products(const LinearRecipe& r);
// The recipes FSDP's FP8 all-gather runs (enable_fsdp_float8_all_gather): output and
// grad_input both read the weight in FP8, with scales from its current amax (not a history).
// Where one cast does not serve both, each product's cast is gathered (dist/fp8_gather.h).
bool gathers_weight_in_fp8(const LinearRecipe& r);
// Why gathers_weight_in_fp8(r) is false, for an error ("" when it is true).
const char* fp8_gather_refusal(const LinearRecipe& r);
// True when a linear may save its input for backward as the output product's FP8 cast (policy
// save_fp8_activations, DeepSeek-V3's cached FP8 activations): grad_weight is an FP8 product
// that quantizes Xᵀ from it (exactly, by transposing, when its blocks are output's transposed;
// else dequantized and cast again, as DeepSeek turns 1x128 tiles into 128x1), and the scales
// come from the tensor itself, not an amax history.
bool saves_fp8_input(const LinearRecipe& r);
// Why saves_fp8_input(r) is false, for an error ("" when it is true).
const char* fp8_save_refusal(const LinearRecipe& r);
// Whether a product of r sums in the tensor core's FP8 accumulator (fast_accum), which the GPU
// accumulator model describes: none of MX's and NVFP4's block-scaled products do.
bool sums_in_fast_accum(const LinearRecipe& r);
// The multiple grad_weight's operands are zero-padded to along the tokens under r: NVFP4 casts
// runs of 16 (its Hadamard transform's and blocks' length), as TE pads; else 1 (no padding).
int64_t token_multiple(const LinearRecipe& r);
// Whether grad_weight's Xᵀ cast is output's X cast transposed (tensorwise, te_current).
bool input_cast_serves_grad_weight(const LinearRecipe& r);

}  // namespace mixprec::amp
