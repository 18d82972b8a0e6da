// One linear layer's products, shared by linear and grouped_linear (private to src/ops): the
// operands as its GEMMs read them, and the forward and backward products into tensors made
// beforehand, so a caller can run many of them from its own threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/fp8_monitor.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/amp/policy.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::detail {

// The Philox stream a linear's stochastic cast draws under its key: its module path, the
// product and the operand's role ("input", "weight", "grad_output") hashed, so every operand
// of every linear draws its own numbers (a module run twice under one key draws the same ones).
uint64_t rounding_stream(std::string_view module, amp::Fp8Product product, std::string_view role);

struct LinearProduct {
  Tensor x2;  // x as [rows, In], rounded under the matmul precision
  Tensor w;   // weight [Out, In], rounded the same way (undefined when w_fp8 is filed)
  // The weight as FSDP's FP8 all-gather delivered it (amp/fp8_weights.h): the output product's
  // weight operand, transposed for grad_input's; the weight itself has no bytes.
  std::optional<backend::Quantized> w_fp8;
  std::optional<backend::Quantized> w_fp8_t;  // grad_input's own cast of it (Wᵀ), if filed
  DType w_dtype = DType::f32;
  // The input as the output product's FP8 cast, kept for backward instead of x2 (policy
  // save_fp8_activations; linear_recipe.h saves_fp8_input).
  std::optional<backend::Quantized> x_fp8;
  Tensor b;  // bias [Out] as given (undefined: none)
  Shape x_shape;
  DType x_dtype = DType::f32;
  amp::MatmulPrecision precision = amp::MatmulPrecision::highest;
  // The low-precision recipe of the autocast guards for this linear (null: none); its FP8
  // products quantize the operands above and run the scaled GEMM, the others run as usual.
  const amp::LinearRecipe* recipe = nullptr;
  // A delayed recipe's state; this linear's module path, its tensors' keys' stem and its
  // stochastic casts' streams'.
  amp::DelayedScaling* delayed = nullptr;
  std::string module_path;
  uint64_t rounding_seed = 0;  // the key of the recipe's stochastic casts (autocast's)
  bool record_amax = false;    // a training forward's (grad mode on): its casts feed the history
  // The GPU accumulator model the recipe's fast-accumulation products are summed by (null: f32).
  const AccumulatorModel* accumulator = nullptr;
  // With a recipe: the module path and order the numerics monitor files its FP8 operands
  // under, captured here because the backward runs outside the module's scope.
  amp::Fp8Site fp8_site;
  int64_t rows = 0, in = 0, out = 0;
  bool grouped_site = false;  // a stacked weight's group, by the grouped recipe

  // Checks x [..., In], weight [Out, In] and bias (after autocast) and makes the operands;
  // `op` names the caller in errors. `site`: look up the autocast guards' recipe for a linear
  // or a grouped GEMM's group (none: the compute dtype's GEMMs, whatever the guards say).
  static LinearProduct prepare(const char* op, const Tensor& x, const Tensor& weight,
                               const Tensor& bias, std::optional<amp::RecipeSite> site = {});
  void release() {
    x2 = w = b = Tensor();
    w_fp8.reset();
    w_fp8_t.reset();
    x_fp8.reset();
  }
  // With save_fp8_activations in force and a recipe that allows it: x cast once for the output
  // product (amp::quantize_once: shared with the other linears that read x), to be kept for
  // backward; after forward() drop_high_precision_input() lets x2 go.
  void cast_input_for_saving();
  void drop_high_precision_input() {
    if (x_fp8) x2 = Tensor();
  }

  // y [..., Out] in x's dtype, made here; forward() fills it: x2 · wᵀ + b.
  Tensor make_output() const;
  void forward(const Tensor& y) const;

  // One backward: dY as the products read it (rounded under the precision) and the wanted
  // gradients, made here in their final shapes and dtypes (dX in x's, dW in f32: a weight
  // gradient is never rounded to bf16/f16); db (column sums of dY, f32) is already summed.
  // grad_x / grad_w run the products that fill dx / dw.
  struct Grads {
    Tensor operand, dx, dw, db;
  };
  Grads start_backward(const Tensor& dy, bool want_x, bool want_w, bool want_b) const;
  void grad_x(const Grads& g) const;  // dX = dY · W
  void grad_w(const Grads& g) const;  // dW = dYᵀ · X

 private:
  // C = A·Bᵀ in f32 by one FP8 product of the recipe, plus `bias`; `a_role` / `b_role` name the
  // operands (input, weight, grad_output) for a delayed recipe's keys. `b_cast` / `a_cast`: the
  // operand already quantized (an FP8-gathered weight, a saved FP8 input), used as it is.
  // While the numerics monitor collects, both quantized operands are measured against their
  // sources under fp8_site and `product`.
  Tensor fp8_product(const amp::ProductRecipe& r, const Tensor& a, const char* a_role,
                     const Tensor& b, const char* b_role, const Tensor& bias,
                     amp::Fp8Product product, const backend::Quantized* b_cast = nullptr,
                     const backend::Quantized* a_cast = nullptr) const;
};

}  // namespace mixprec::detail
