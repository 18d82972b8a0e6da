// Precision policies: which dtype each part of a training step uses. A policy names the dtype
// of the parameters' working copy (param), of the forward/backward math (compute), of gradient
// accumulation and reduction (reduce) and of the model's outputs (output); master weights and
// optimizer state are f32 unless `f32_master` is false (the pure low-precision modes).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mixprec/amp/autocast_table.h"
#include "mixprec/numerics/dtype.h"

namespace mixprec {
struct AccumulatorModel;  // numerics/accumulator_model.h
}

namespace mixprec::amp {

struct LinearRecipe;  // linear_recipe.h

// How an f32 x f32 matmul runs (the CPU stand-in for TF32 tensor cores and for TPUs that run
// f32 matmuls in bf16): highest = f32 operands; high = operands rounded to TF32 (10-bit
// mantissa, nearest even); medium = operands rounded to bf16. Accumulation is f32 in all.
// linear, matmul and bmm read it when both operands are f32, and their backward matmuls use
// the setting their forward saw (not the one in force when backward runs).
enum class MatmulPrecision { highest, high, medium };

// How a low-precision master (f32_master == false) takes an update.
enum class MasterUpdate { nearest, stochastic, kahan };

struct MixedPrecisionPolicy {
  DType param_dtype = DType::f32;
  DType compute_dtype = DType::f32;
  DType reduce_dtype = DType::f32;
  DType output_dtype = DType::f32;
  bool f32_master = true;  // false: the master is param_dtype and optimizer state too
  MasterUpdate master_update = MasterUpdate::nearest;  // used when !f32_master
  MatmulPrecision matmul_precision = MatmulPrecision::highest;
  bool loss_scaling = false;  // the preset's default: dynamic loss scaling (fp16)
  // Low-precision linears (linear_recipe.h): null = every linear in compute_dtype. Otherwise
  // the linears whose module path contains none of linear_skip (torchao's filter_fqns, with
  // its "auto_filter_small_kn" entry) run their products by the recipe.
  const LinearRecipe* linear_recipe = nullptr;
  std::vector<std::string> linear_skip;
  // MoE experts' grouped GEMMs (stacked [G, Out, In] weights): null = compute_dtype. Otherwise
  // the groups whose module path contains one of grouped_fqns run by this recipe.
  const LinearRecipe* grouped_recipe = nullptr;
  std::vector<std::string> grouped_fqns;
  // The recipes' fast-accumulation products (linear_recipe.h) summed by this GPU accumulator
  // model (numerics/accumulator_model.h's table); null = exact products in f32.
  const AccumulatorModel* accumulator = nullptr;
  // The recipe's linears save their input for backward as its FP8 cast, not in the compute
  // dtype (DeepSeek-V3's FP8 activation cache; linear_recipe.h saves_fp8_input).
  bool save_fp8_activations = false;
  // The same for the grouped recipe's MoE experts ([quantize.grouped_mm.*]'s key).
  bool save_fp8_grouped_activations = false;
  // Whose autocast op lists the compute runs by (autocast_table.h): mixprec's, or PyTorch's
  // CUDA or CPU ones ("autocast_ops=torch_cuda").
  AutocastOpTable autocast_ops = AutocastOpTable::mixprec;

  DType master_dtype() const { return f32_master ? DType::f32 : param_dtype; }
  bool operator==(const MixedPrecisionPolicy&) const = default;
};

// The named presets: fp32, tf32, bf16-mixed, fp16-mixed, bf16-pure (stochastic rounding),
// bf16-pure-kahan.
MixedPrecisionPolicy preset(std::string_view name);
// Comma-separated preset names, for error messages and --help.
std::string preset_names();

// A policy from the spellings users bring (case- and whitespace-insensitive):
// - a preset name, or Keras's mixed_bfloat16 / mixed_float16 (= bf16-mixed / fp16-mixed);
// - jmp's "params=float32,compute=bfloat16,output=float32": keys params (param, p),
//   compute (c), reduce (r), output (o), plus master (f32 or the params dtype), update
//   (nearest | stochastic | kahan), matmul (highest | high | medium), loss_scaling (true |
//   false). Values take any parse_dtype spelling of f64, f32, bf16, f16. Unspecified dtypes
//   are f32; reduce and master default to the wider of f32 and params;
// - a bare dtype ("bf16"): params, compute, reduce and output all that dtype (jmp's rule),
//   master still f32 (f64 for "f64"): training without an f32 master is what the bf16-pure
//   presets opt into, with their update rule;
// - a linear recipe's name ("rowwise", "mxfp8_cublas": linear_recipe.h): bf16-mixed with that
//   recipe on every linear but lm_head. In key=value form: linear=<recipe> and
//   linear_skip=<module substrings separated by '|'> (default lm_head; "" for none); a recipe
//   needs compute bf16 or f16. grouped=<recipe> and grouped_fqns=<substrings separated by '|'>
//   (default experts) do the same for MoE experts' grouped GEMMs. accumulator=<f32 | h100>
//   sums the recipes' fast-accumulation products by that GPU accumulator model;
//   save_fp8_activations=true keeps the recipe's linears' inputs for backward in FP8, and
//   save_fp8_grouped_activations=true the grouped recipe's experts' inputs.
// Throws mixprec::Error naming the bad token and listing what is valid.
MixedPrecisionPolicy parse_policy(std::string_view text);

// Every field, in parse_policy's key=value form, so parse_policy(to_string(p)) == p:
// "param=bf16,compute=bf16,reduce=f32,output=f32,master=f32,update=nearest,matmul=highest,
// loss_scaling=false".
std::string to_string(const MixedPrecisionPolicy& policy);
// The preset's name when the policy is one ("bf16-mixed"; a recipe's name for bf16-mixed with
// that recipe and linear_skip lm_head), else to_string(policy).
std::string display_name(const MixedPrecisionPolicy& policy);

MatmulPrecision parse_matmul_precision(std::string_view name);  // highest | high | medium
const char* matmul_precision_name(MatmulPrecision p);

// The process-wide f32 matmul precision (default highest), as torch's
// set_float32_matmul_precision; MatmulPrecisionGuard sets it for a scope.
MatmulPrecision matmul_precision();
void set_matmul_precision(MatmulPrecision p);
class MatmulPrecisionGuard {
 public:
  explicit MatmulPrecisionGuard(MatmulPrecision p);
  ~MatmulPrecisionGuard();
  MatmulPrecisionGuard(const MatmulPrecisionGuard&) = delete;
  MatmulPrecisionGuard& operator=(const MatmulPrecisionGuard&) = delete;

 private:
  MatmulPrecision saved_;
};

}  // namespace mixprec::amp
