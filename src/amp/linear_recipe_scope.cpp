// Which linears run by the low-precision recipe of the autocast guards in force.
#include <string_view>

#include "autocast_state.h"
#include "mixprec/amp/compute_scope.h"
#include "mixprec/amp/linear_recipe.h"

namespace mixprec::amp {

DelayedScaling* delayed_scaling_here() {
  return detail::t_autocast_active && detail::state().overrides
             ? detail::state().overrides->delayed_scaling
             : nullptr;
}

const AccumulatorModel* accumulator_here() {
  return detail::t_autocast_active && detail::state().overrides
             ? detail::state().overrides->accumulator
             : nullptr;
}

bool save_fp8_activations_here(bool grouped) {
  if (!detail::t_autocast_active || !detail::state().overrides) return false;
  const detail::Overrides& o = *detail::state().overrides;
  return grouped ? o.save_fp8_grouped_activations : o.save_fp8_activations;
}

uint64_t rounding_seed_here() {
  return detail::t_autocast_active && detail::state().overrides
             ? detail::state().overrides->rounding_seed
             : 0;
}

const LinearRecipe* linear_recipe_here(int64_t out, int64_t in, RecipeSite site) {
  if (!detail::t_autocast_active) return nullptr;
  const detail::AutocastState& s = detail::state();
  if (!s.overrides) return nullptr;
  const bool grouped = site == RecipeSite::grouped;
  const LinearRecipe* r = grouped ? s.overrides->grouped_recipe : s.overrides->linear_recipe;
  if (!r) return nullptr;
  // An fp32 module, or an op override that keeps linear out of lower precision, wins.
  if (effective_category("linear") != CastCategory::lower_precision) return nullptr;
  const std::string_view path = s.module_path;
  if (grouped)
    return grouped_recipe_converts(*r, s.overrides->grouped_fqns, path, out, in) ? r : nullptr;
  if (!recipe_converts(*r, s.overrides->recipe_skip, path, out, in)) return nullptr;
  return r;
}

AutocastOptions ComputeScope::autocast_options(const MixedPrecisionPolicy& policy,
                                               DelayedScaling* delayed,
                                               std::optional<uint64_t> rounding_seed) {
  return {.op_table = policy.autocast_ops,
          .linear_recipe = policy.linear_recipe,
          .recipe_skip = policy.linear_skip,
          .grouped_recipe = policy.grouped_recipe,
          .grouped_fqns = policy.grouped_fqns,
          .delayed_scaling = delayed,
          .accumulator = policy.accumulator,
          .save_fp8_activations = policy.save_fp8_activations,
          .save_fp8_grouped_activations = policy.save_fp8_grouped_activations,
          .rounding_seed = rounding_seed};
}

}  // namespace mixprec::amp
