#include "mixprec/amp/linear_recipe.h"

#include <algorithm>

#include <string>

#include "mixprec/core/error.h"
#include "mixprec/core/spelling.h"

namespace mixprec::amp {

namespace {

using backend::BlockShape;
using backend::QuantSpec;

constexpr DType e4m3 = DType::f8_e4m3fn, e5m2 = DType::f8_e5m2;
constexpr BlockShape kTensor{0, 0}, kRow{1, 0}, kMx{1, 32}, kTile{1, 128}, kBlock{128, 128};
constexpr BlockShape kNvfp4{1, 16}, kNvfp4Weight{16, 16};

constexpr ProductRecipe fp8(QuantSpec a, QuantSpec b) {
  return {true, a, b};
}
constexpr ProductRecipe fp8_fast_accum(QuantSpec a, QuantSpec b) {
  return {true, a, b, true};
}
constexpr ProductRecipe kHighPrecision{};

constexpr QuantSpec torchao(DType d, BlockShape b, bool pow2 = false) {
  return {d, b, ScaleRule::torchao, pow2};
}
constexpr QuantSpec te(DType d, BlockShape b, bool pow2 = false) {
  return {d, b, ScaleRule::te, pow2};
}
constexpr QuantSpec deepseek(BlockShape b, bool ue8m0) {
  return {e4m3, b, ScaleRule::deepseek, ue8m0};
}
constexpr QuantSpec mx(ScaleRule rule) {  // E8M0 scales: the rule is always power-of-two
  return {e4m3, kMx, rule, false};
}
// TE's NVFP4: E4M3 block scales under the tensor's f32 one; `rht` the Hadamard transform of
// grad_weight's operands, `stochastic` the gradients' rounding.
constexpr QuantSpec nvfp4(BlockShape b, bool rht = false, bool stochastic = false) {
  return {DType::f4_e2m1fn, b, ScaleRule::te_nvfp4, false, rht, stochastic};
}

// clang-format off
constexpr LinearRecipe kRecipes[] = {
  // name, aliases, section, source;
  // output (X, W), grad_input (dY, Wᵀ), grad_weight (dYᵀ, Xᵀ); auto_filter_small_kn rule
  {"tensorwise", "", "float8", "torchao Float8LinearConfig() (torchtitan's default): E4M3 forward, E5M2 gradients, one scale per tensor",
   fp8_fast_accum(torchao(e4m3, kTensor), torchao(e4m3, kTensor)),
   fp8(torchao(e5m2, kTensor), torchao(e4m3, kTensor)),
   fp8(torchao(e5m2, kTensor), torchao(e4m3, kTensor)), SmallLinearRule::tensorwise},
  {"rowwise", "", "float8", "torchao Float8LinearRecipeName.ROWWISE: E4M3 everywhere, one power-of-two scale per row along each product's contraction",
   fp8_fast_accum(torchao(e4m3, kRow, true), torchao(e4m3, kRow, true)),
   fp8(torchao(e4m3, kRow, true), torchao(e4m3, kRow, true)),
   fp8(torchao(e4m3, kRow, true), torchao(e4m3, kRow, true)), SmallLinearRule::rowwise},
  {"rowwise_with_gw_hp", "", "float8", "torchao Float8LinearRecipeName.ROWWISE_WITH_GW_HP: rowwise forward, tensorwise weight in grad_input, grad_weight in high precision",
   fp8_fast_accum(torchao(e4m3, kRow, true), torchao(e4m3, kRow, true)),
   fp8(torchao(e4m3, kRow, true), torchao(e4m3, kTensor, true)),
   kHighPrecision, SmallLinearRule::none},
  {"te_delayed", "delayed_scaling,te_delayed_scaling", "float8", "Transformer Engine DelayedScaling (HYBRID, its default): E4M3 forward, E5M2 gradients, per-tensor scales from an amax history ([quantize.linear.float8] amax_history_len, amax_compute_algo, margin)",
   fp8_fast_accum(te(e4m3, kTensor), te(e4m3, kTensor)),
   fp8(te(e5m2, kTensor), te(e4m3, kTensor)),
   fp8(te(e5m2, kTensor), te(e4m3, kTensor)), SmallLinearRule::none, true},
  {"te_current", "float8_current_scaling", "float8", "Transformer Engine Float8CurrentScaling (HYBRID): E4M3 forward, E5M2 gradients, per-tensor scales from the current amax",
   fp8_fast_accum(te(e4m3, kTensor), te(e4m3, kTensor)),
   fp8(te(e5m2, kTensor), te(e4m3, kTensor)),
   fp8(te(e5m2, kTensor), te(e4m3, kTensor)), SmallLinearRule::none},
  {"te_blockwise", "float8_block_scaling", "float8", "Transformer Engine Float8BlockScaling: E4M3, 1x128 activation and gradient tiles, 128x128 weight blocks, power-of-two f32 scales",
   fp8_fast_accum(te(e4m3, kTile, true), te(e4m3, kBlock, true)),
   fp8_fast_accum(te(e4m3, kTile, true), te(e4m3, kBlock, true)),
   fp8_fast_accum(te(e4m3, kTile, true), te(e4m3, kTile, true)), SmallLinearRule::none},
  {"deepseek_v3", "blockwise", "float8", "DeepSeek-V3 (arXiv:2412.19437 §3.3): E4M3 everywhere, 1x128 tiles (128x1 along tokens for grad_weight), 128x128 weight blocks, f32 scales",
   fp8_fast_accum(deepseek(kTile, false), deepseek(kBlock, false)),
   fp8_fast_accum(deepseek(kTile, false), deepseek(kBlock, false)),
   fp8_fast_accum(deepseek(kTile, false), deepseek(kTile, false)), SmallLinearRule::none},
  {"deepseek_v3_ue8m0", "", "float8", "DeepSeek-V3.1 scale_fmt = ue8m0: deepseek_v3 with power-of-two scales rounded up",
   fp8_fast_accum(deepseek(kTile, true), deepseek(kBlock, true)),
   fp8_fast_accum(deepseek(kTile, true), deepseek(kBlock, true)),
   fp8_fast_accum(deepseek(kTile, true), deepseek(kTile, true)), SmallLinearRule::none},
  {"mxfp8_cublas", "mxfp8,mxfp8_emulated", "mx", "torchao MXLinear (torchtitan's [quantize.linear.mx] default): E4M3, 1x32 blocks along each contraction, E8M0 scales, OCP FLOOR",
   fp8(mx(ScaleRule::mx_floor), mx(ScaleRule::mx_floor)),
   fp8(mx(ScaleRule::mx_floor), mx(ScaleRule::mx_floor)),
   fp8(mx(ScaleRule::mx_floor), mx(ScaleRule::mx_floor)), SmallLinearRule::none},
  {"mxfp8_cublas_rceil", "mxfp8_rceil,mxfp8_emulated_rceil,te_mxfp8", "mx", "torchao MXFP8 RCEIL (also Transformer Engine MXFP8BlockScaling): mxfp8_cublas with E8M0 scales rounded up",
   fp8(mx(ScaleRule::mx_rceil), mx(ScaleRule::mx_rceil)),
   fp8(mx(ScaleRule::mx_rceil), mx(ScaleRule::mx_rceil)),
   fp8(mx(ScaleRule::mx_rceil), mx(ScaleRule::mx_rceil)), SmallLinearRule::none},
  {"te_nvfp4", "nvfp4,nvfp4_block_scaling", "mx", "Transformer Engine NVFP4BlockScaling: E2M1 values in 1x16 blocks with E4M3 scales under an f32 tensor scale, 16x16 weight blocks, gradients rounded stochastically, grad_weight's operands through the random Hadamard transform",
   fp8(nvfp4(kNvfp4), nvfp4(kNvfp4Weight)),
   fp8(nvfp4(kNvfp4, false, true), nvfp4(kNvfp4Weight)),
   fp8(nvfp4(kNvfp4, true, true), nvfp4(kNvfp4, true)), SmallLinearRule::none},
};
// clang-format on

// clang-format off
constexpr GroupedRecipe kGroupedRecipes[] = {
  // name, aliases, section, linear recipe, source
  {"rowwise", "fp8_rowwise", "float8", "rowwise", "torchao _to_fp8_rowwise_then_scaled_grouped_mm (Float8TrainingRecipe.FP8_ROWWISE, its only one): E4M3 everywhere, power-of-two row scales, grad_weight's over each group's tokens"},
  {"mxfp8", "mxfp8_rceil,mxfp8_emulated_rceil", "mx", "mxfp8_cublas_rceil", "torchao _to_mxfp8_then_scaled_grouped_mm (MXFP8TrainingRecipe.MXFP8_RCEIL, torchtitan's recipe_name mxfp8): 1x32 E8M0 blocks, RCEIL"},
};
// clang-format on

}  // namespace

std::span<const GroupedRecipe> grouped_recipes() {
  return kGroupedRecipes;
}

const LinearRecipe* find_grouped_recipe(std::string_view section, std::string_view name) {
  for (const GroupedRecipe& g : kGroupedRecipes)
    if (section == g.section && (name == g.name || in_comma_list(g.aliases, name)))
      return find_any_linear_recipe(g.linear);  // every line names one (the recipe test)
  return nullptr;
}

std::string grouped_recipe_names(std::string_view section) {
  std::string out;
  for (const GroupedRecipe& g : kGroupedRecipes)
    if (section == g.section) out += (out.empty() ? "" : ", ") + std::string(g.name);
  return out;
}

std::span<const LinearRecipe> linear_recipes() {
  return kRecipes;
}

const LinearRecipe* find_any_linear_recipe(std::string_view name) {
  for (const LinearRecipe& r : kRecipes)
    if (name == r.name || in_comma_list(r.aliases, name)) return &r;
  return nullptr;
}

const LinearRecipe& find_linear_recipe(std::string_view section, std::string_view name,
                                       std::string_view where) {
  const LinearRecipe* r = find_any_linear_recipe(name);
  if (r && section == r->section) return *r;
  throw Error(std::string(where), "unknown " + std::string(section) + " recipe '" +
                                      std::string(name) +
                                      "'; valid: " + linear_recipe_names(section));
}

std::string linear_recipe_names(std::string_view section) {
  std::string out;
  for (const LinearRecipe& r : kRecipes)
    if (section.empty() || section == r.section)
      out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

bool too_small_for_fp8(SmallLinearRule rule, int64_t out, int64_t in) {
  switch (rule) {
    case SmallLinearRule::none:
      return false;
    case SmallLinearRule::tensorwise:
      return in <= 4096 && out <= 1024;
    case SmallLinearRule::rowwise:
      return out <= 2048 || in <= 1024 || (out <= 4096 && in <= 2048);
  }
  return false;
}

bool recipe_converts(const LinearRecipe& r, std::span<const std::string> skip,
                     std::string_view path, int64_t out, int64_t in) {
  if (out % 16 != 0 || in % 16 != 0) return false;
  for (const std::string& s : skip) {
    const bool kept = s == kAutoFilterSmallKn ? too_small_for_fp8(r.small_rule, out, in)
                                              : path.find(s) != std::string_view::npos;
    if (kept) return false;
  }
  return true;
}

bool grouped_recipe_converts(const LinearRecipe& r, std::span<const std::string> fqns,
                             std::string_view path, int64_t out, int64_t in) {
  return recipe_converts(r, {}, path, out, in) &&
         std::any_of(fqns.begin(), fqns.end(),
                     [&](const std::string& f) { return path.find(f) != std::string_view::npos; });
}

namespace {

// The cast of a matrix by `a` equals the transposed cast of its transpose by `b`.
bool transposed_alike(const QuantSpec& a, const QuantSpec& b) {
  return a.element == b.element && a.rule == b.rule && a.pow2 == b.pow2 && a.rht == b.rht &&
         a.stochastic == b.stochastic && a.block.rows == b.block.cols &&
         a.block.cols == b.block.rows;
}

// An NVFP4 product: its casts carry a second, tensor-wide scale.
bool is_nvfp4(const ProductRecipe& p) {
  return p.fp8 && (p.a.rule == ScaleRule::te_nvfp4 || p.b.rule == ScaleRule::te_nvfp4);
}
bool two_level(const LinearRecipe& r) {
  return is_nvfp4(r.output) || is_nvfp4(r.grad_input) || is_nvfp4(r.grad_weight);
}

}  // namespace

bool weight_cast_serves_both_products(const LinearRecipe& r) {
  return r.output.fp8 && r.grad_input.fp8 && transposed_alike(r.output.b, r.grad_input.b);
}

const char* fp8_gather_refusal(const LinearRecipe& r) {
  if (!r.output.fp8 || !r.grad_input.fp8) return "reads the weight in high precision";
  if (r.delayed) return "casts with amax histories";
  // The gather's shards would need the global tensor amax before their casts, and its casts
  // carry no tensor scale yet.
  if (two_level(r)) return "casts the weight under a tensor-wide NVFP4 scale, not gathered yet";
  return "";
}

bool gathers_weight_in_fp8(const LinearRecipe& r) {
  return *fp8_gather_refusal(r) == '\0';
}

const char* fp8_save_refusal(const LinearRecipe& r) {
  if (!r.output.fp8 || !r.grad_weight.fp8) return "runs grad_weight in high precision";
  if (r.delayed) return "casts with amax histories";
  // TE keeps grad_weight's own cast of X (through the Hadamard transform) made in forward;
  // here grad_weight casts X again from the saved input.
  if (two_level(r)) return "casts Xᵀ for grad_weight through the Hadamard transform";
  return "";
}

bool saves_fp8_input(const LinearRecipe& r) {
  return *fp8_save_refusal(r) == '\0';
}

int64_t token_multiple(const LinearRecipe& r) {
  return is_nvfp4(r.grad_weight) ? 16 : 1;
}

bool sums_in_fast_accum(const LinearRecipe& r) {
  return r.output.fast_accum || r.grad_input.fast_accum || r.grad_weight.fast_accum;
}

bool input_cast_serves_grad_weight(const LinearRecipe& r) {
  return saves_fp8_input(r) && transposed_alike(r.output.a, r.grad_weight.b);
}

}  // namespace mixprec::amp
