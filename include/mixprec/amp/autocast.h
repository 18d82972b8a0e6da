// Autocast: inside an AutocastGuard every op casts its floating inputs by its row of the
// autocast table (mixprec/amp/autocast_table.h) before computing, so a model written once
// runs in f32 or in mixed precision.
//
//   amp::AutocastGuard amp(DType::bf16, {.fp32_modules = {"*.router", "lm_head"}});
//   Tensor logits = model.forward(x);   // matmuls in bf16, softmax/norms/losses in f32,
//                                       // everything under a "*.router" scope in f32
//
// Models name their submodules with ModuleScope so overrides can reach them:
//
//   Tensor Moe::forward(const Tensor& x) {
//     amp::ModuleScope scope("router");  // path "blocks.0.moe.router" inside outer scopes
//     ...
//   }
//
// State is per thread. Casts record autograd history (Tensor::to), so f32 weights get f32
// gradients through CastBackward. Weights must not be modified in place inside a region: a
// leaf's cast is cached for the whole outermost region.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "mixprec/amp/autocast_table.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {
struct AccumulatorModel;  // numerics/accumulator_model.h
}

namespace mixprec::amp {

struct LinearRecipe;
class DelayedScaling;

struct AutocastOptions {
  // Which op table's categories apply (autocast_table.h): mixprec's (the default), or PyTorch's
  // CUDA or CPU lists. An inner guard without one keeps the outer guard's.
  std::optional<AutocastOpTable> op_table{};
  // Globs ('*' any characters, dots included; '?' one) on the ModuleScope path: every op
  // inside a matching scope, or inside any scope below it, runs with fp32 category (a
  // matmul gets f32 operands). Beats every other rule.
  std::vector<std::string> fp32_modules{};
  // Table op names forced to fp32 / to lower precision everywhere (outside fp32 modules).
  std::vector<std::string> fp32_ops{};
  std::vector<std::string> lower_precision_ops{};
  // Cache casts of leaf tensors that require grad (weights) for the outermost region.
  bool cache_casts = true;
  // Low-precision linears (linear_recipe.h; an inner guard's recipe replaces the outer one):
  // a `linear` that runs in lower precision here and whose module path contains none of
  // `recipe_skip` (torchao's filter_fqns: substrings) runs its products by the recipe. As
  // torchtitan's filter, a weight with a dim that is not a multiple of 16 stays in the compute
  // dtype, and with the entry "auto_filter_small_kn" in recipe_skip so do the recipe's small
  // ones (torchao's H100 thresholds).
  const LinearRecipe* linear_recipe = nullptr;
  std::vector<std::string> recipe_skip{};
  // MoE experts' grouped GEMMs (torchtitan's [quantize.grouped_mm.*]): a stacked [G, Out, In]
  // weight's groups whose module path contains one of `grouped_fqns` (an inclusion list, as
  // torchtitan's fqns) run by `grouped_recipe`; the 16-multiple rule holds here too.
  const LinearRecipe* grouped_recipe = nullptr;
  std::vector<std::string> grouped_fqns{};
  // The amax histories and scales a delayed recipe (te_delayed) casts with (delayed_scaling.h);
  // owned by the caller (the trainer), kept by linears for their backward.
  DelayedScaling* delayed_scaling = nullptr;
  // The GPU accumulator model the recipes' fast-accumulation products are summed by (null:
  // exact products in f32); static storage (named_accumulators()).
  const AccumulatorModel* accumulator = nullptr;
  // The recipe's linears save their inputs for backward as their FP8 casts (saves_fp8_input),
  // one cast per input tensor however many linears read it (q/k/v, gate/up).
  bool save_fp8_activations = false;
  // The same for the grouped recipe's groups (MoE experts).
  bool save_fp8_grouped_activations = false;
  // The key of the recipes' stochastic casts (NVFP4's gradients) for the linears prepared here;
  // each operand draws its own stream of it. The trainer gives one per step and micro-batch;
  // without one the key is 0, the same every step, so a caller training by hand should give
  // each step its own (else the rounding errors of a fixed input repeat, not average out).
  std::optional<uint64_t> rounding_seed{};
};

// Enables autocast to `dtype` (bf16 or f16) for the scope; f32 means off. Nestable: an inner
// guard replaces the dtype and on/off state and adds its options to the outer ones (an inner
// per-op override replaces an outer one for that op); the previous state returns on exit.
// The cast cache lives from the first enabled guard on this thread to its exit.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype, bool enabled = true);
  AutocastGuard(DType dtype, const AutocastOptions& options, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  struct Saved;
  std::unique_ptr<Saved> saved_;  // the state to restore
};

// Appends ".name" (or "name" at the top) to this thread's module path for the scope.
class ModuleScope {
 public:
  explicit ModuleScope(std::string_view name);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  std::size_t saved_size_;
};

bool autocast_enabled();
DType autocast_dtype();          // meaningful when enabled
std::string_view module_path();  // "" outside every ModuleScope
// The category `op` runs with here and now: the table's, after op and module overrides.
CastCategory effective_category(AutocastOpId op);
const char* category_name(CastCategory c);
// Which recipe a product looks up: a linear's (a 2-d weight, nn.Linear's) or a grouped GEMM's
// (a stacked expert weight, torch._grouped_mm's).
enum class RecipeSite : uint8_t { linear, grouped };
// The recipe a linear of weight [out, in] runs by here and now (null: the compute dtype's GEMM).
const LinearRecipe* linear_recipe_here(int64_t out, int64_t in,
                                       RecipeSite site = RecipeSite::linear);
// The delayed-scaling state of the guards in force (null: none).
DelayedScaling* delayed_scaling_here();
// The accumulator model of the guards in force (null: f32).
const AccumulatorModel* accumulator_here();
// Whether the guards in force save linears' inputs in FP8 (`grouped`: grouped GEMMs' groups').
bool save_fp8_activations_here(bool grouped = false);
// The stochastic casts' key of the guards in force (0 when none gives one).
uint64_t rounding_seed_here();

// What autocast did on this thread since the outermost enabled guard began (kept after it
// ends, until the next one begins).
struct AutocastStats {
  int64_t casts = 0;       // Tensor::to conversions made (cached or not)
  int64_t cache_hits = 0;  // casts served from the cache
};
AutocastStats autocast_stats();

namespace detail {
// Mirrors "a guard is enabled on this thread": the hooks' whole cost when autocast is off.
extern thread_local constinit bool t_autocast_active;
// Casts the defined inputs in[i] as `op` requires, writing into out[i] only those it casts.
void autocast_cast(AutocastOpId op, const Tensor* const* in, Tensor* out, std::size_t n);
}  // namespace detail

// The hook at the top of each op:
//   auto [x, w, b] = amp::autocast_args("linear", x_in, w_in, b_in);
// x, w, b are references to the inputs themselves when nothing is cast (always, when
// autocast is off: no allocation, no copy, no reference count touched), else to the casts.
// Integer and undefined inputs pass through untouched.
template <std::size_t N>
class AutocastArgs {
 public:
  template <class... T>
  AutocastArgs(AutocastOpId op, const T&... in) : in_{&in...} {
    if (detail::t_autocast_active) detail::autocast_cast(op, in_.data(), cast_.data(), N);
  }
  AutocastArgs(const AutocastArgs&) = delete;
  AutocastArgs& operator=(const AutocastArgs&) = delete;

  template <std::size_t I>
  const Tensor& get() const {
    return cast_[I].defined() ? cast_[I] : *in_[I];
  }

 private:
  std::array<const Tensor*, N> in_;
  std::array<Tensor, N> cast_;  // undefined where the input is used as given
};

template <class... T>
AutocastArgs<sizeof...(T)> autocast_args(AutocastOpId op, const T&... in) {
  return AutocastArgs<sizeof...(T)>(op, in...);
}

// The same for an op taking a list (concat): the list itself, or a cast copy of it.
class AutocastList {
 public:
  AutocastList(AutocastOpId op, const std::vector<Tensor>& in);
  const std::vector<Tensor>& get() const { return cast_.empty() ? *in_ : cast_; }

 private:
  const std::vector<Tensor>* in_;
  std::vector<Tensor> cast_;
};

}  // namespace mixprec::amp

template <std::size_t N>
struct std::tuple_size<mixprec::amp::AutocastArgs<N>> : std::integral_constant<std::size_t, N> {};
template <std::size_t I, std::size_t N>
struct std::tuple_element<I, mixprec::amp::AutocastArgs<N>> {
  using type = const mixprec::Tensor&;
};
