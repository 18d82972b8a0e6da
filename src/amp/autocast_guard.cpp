// AutocastGuard: validates its options, layers them over the outer guards' state and restores
// that state on exit; owns the cast cache's lifetime (the outermost enabled guard).
#include <algorithm>

#include "autocast_state.h"
#include "mixprec/core/error.h"

namespace mixprec::amp {
namespace detail {

thread_local constinit bool t_autocast_active = false;

AutocastState& state() {
  thread_local AutocastState s;
  return s;
}

namespace {
// Checkpoint recomputes re-enter the forward's autocast state (checkpoint_state.cpp).
[[maybe_unused]] const bool g_registered = register_checkpoint_state();
}  // namespace

}  // namespace detail

namespace {

constexpr const char* kAutocastGuard = "AutocastGuard";

std::string table_op_names() {
  std::string out;
  for (const AutocastRule& r : kAutocastTable) {
    if (!out.empty()) out += ", ";
    out += r.op;
  }
  return out;
}

int checked_op(const std::string& op) {
  const int i = find_autocast_op(op);
  MIXPREC_CHECK(i >= 0, kAutocastGuard,
                "unknown op '" + op + "' in an op override; autocast ops: " + table_op_names());
  return i;
}

// The outer overrides with `options` laid over them (null when there are none at all).
std::shared_ptr<const detail::Overrides> merge(
    const std::shared_ptr<const detail::Overrides>& outer, const AutocastOptions& options) {
  if (!options.op_table && options.fp32_modules.empty() && options.fp32_ops.empty() &&
      options.lower_precision_ops.empty() && !options.linear_recipe && !options.grouped_recipe &&
      !options.delayed_scaling && !options.accumulator && !options.save_fp8_activations &&
      !options.save_fp8_grouped_activations && !options.rounding_seed)
    return outer;
  auto merged =
      outer ? std::make_shared<detail::Overrides>(*outer) : std::make_shared<detail::Overrides>();
  if (options.op_table) merged->table = *options.op_table;
  for (const std::string& op : options.fp32_ops) {
    MIXPREC_CHECK(std::find(options.lower_precision_ops.begin(), options.lower_precision_ops.end(),
                            op) == options.lower_precision_ops.end(),
                  kAutocastGuard, "op '" + op + "' is in both fp32_ops and lower_precision_ops");
    merged->op[static_cast<std::size_t>(checked_op(op))] = CastCategory::fp32;
  }
  for (const std::string& op : options.lower_precision_ops)
    merged->op[static_cast<std::size_t>(checked_op(op))] = CastCategory::lower_precision;
  for (const std::string& glob : options.fp32_modules) {
    MIXPREC_CHECK(!glob.empty(), kAutocastGuard, "empty glob in fp32_modules");
    merged->fp32_modules.push_back(glob);
  }
  if (options.linear_recipe) {
    merged->linear_recipe = options.linear_recipe;
    merged->recipe_skip = options.recipe_skip;
  }
  if (options.delayed_scaling) merged->delayed_scaling = options.delayed_scaling;
  if (options.accumulator) merged->accumulator = options.accumulator;
  if (options.save_fp8_activations) merged->save_fp8_activations = true;
  if (options.save_fp8_grouped_activations) merged->save_fp8_grouped_activations = true;
  if (options.rounding_seed) merged->rounding_seed = *options.rounding_seed;
  if (options.grouped_recipe) {
    merged->grouped_recipe = options.grouped_recipe;
    merged->grouped_fqns = options.grouped_fqns;
  }
  return merged;
}

}  // namespace

struct AutocastGuard::Saved {
  bool enabled;
  DType dtype;
  bool cache_casts;
  std::shared_ptr<const detail::Overrides> overrides;
  bool counted;  // this guard is enabled and holds a share of the cache's lifetime
};

AutocastGuard::AutocastGuard(DType dtype, bool enabled)
    : AutocastGuard(dtype, AutocastOptions{}, enabled) {}

AutocastGuard::AutocastGuard(DType dtype, const AutocastOptions& options, bool enabled) {
  MIXPREC_CHECK(
      dtype == DType::bf16 || dtype == DType::f16 || dtype == DType::f32, kAutocastGuard,
      std::string("autocast dtype must be bf16, f16 or f32 (off), got ") + dtype_name(dtype));
  detail::AutocastState& s = detail::state();
  auto overrides = merge(s.overrides, options);  // throws before anything changes
  const bool on = enabled && dtype != DType::f32;
  saved_ = std::make_unique<Saved>(Saved{s.enabled, s.dtype, s.cache_casts, s.overrides, on});
  if (on && s.enabled_depth++ == 0) {  // a new region: a fresh cache and fresh counters
    s.cache.clear();
    s.fp8_inputs.clear();
    s.stats = {};
  }
  s.enabled = on;
  if (on) s.dtype = dtype;
  s.cache_casts = options.cache_casts;
  s.overrides = std::move(overrides);
  detail::t_autocast_active = on;
}

AutocastGuard::~AutocastGuard() {
  detail::AutocastState& s = detail::state();
  s.enabled = saved_->enabled;
  s.dtype = saved_->dtype;
  s.cache_casts = saved_->cache_casts;
  s.overrides = std::move(saved_->overrides);
  if (saved_->counted && --s.enabled_depth == 0) {
    s.cache.clear();
    s.fp8_inputs.clear();
  }
  detail::t_autocast_active = s.enabled;
}

bool autocast_enabled() {
  return detail::t_autocast_active;
}

DType autocast_dtype() {
  return detail::state().dtype;
}

AutocastStats autocast_stats() {
  return detail::state().stats;
}

}  // namespace mixprec::amp
