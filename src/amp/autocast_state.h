// Autocast's per-thread state, shared by the guard, the module scopes and the casts
// (private to src/amp).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/backend/quantized.h"

namespace mixprec::amp::detail {

// What the guards in force say beyond dtype and on/off; immutable once built (guards share it).
struct Overrides {
  AutocastOpTable table = AutocastOpTable::mixprec;  // the column the op hooks read
  std::array<std::optional<CastCategory>, kNumAutocastOps> op{};
  std::vector<std::string> fp32_modules;  // globs on the module path
  const LinearRecipe* linear_recipe = nullptr;
  std::vector<std::string> recipe_skip;  // substrings of the module path (and auto_filter_small_kn)
  const LinearRecipe* grouped_recipe = nullptr;
  std::vector<std::string> grouped_fqns;  // substrings of the module path: an inclusion list
  DelayedScaling* delayed_scaling = nullptr;
  const AccumulatorModel* accumulator = nullptr;
  bool save_fp8_activations = false, save_fp8_grouped_activations = false;
  uint64_t rounding_seed = 0;
};

// A leaf's cast, keyed by (its autograd state, target dtype, grad mode at the cast): a cast
// made under NoGradGuard has no history and must not serve a region that records it.
using CastKey = std::tuple<const void*, DType, bool>;
struct CachedCast {
  Tensor source;  // held so its address cannot be reused by another tensor while cached
  Tensor cast;
};

// A linear input's FP8 cast (fp8_input_cache.h), keyed by (storage, offset, shape, spec).
using Fp8InputKey = std::tuple<const void*, int64_t, Shape, DType, int64_t, int64_t, int, bool>;
// Weak throughout: the linears that save a cast keep it alive, the cache only shares it (a
// dead source's address may be reused; a cast no linear kept is gone).
struct WeakTensor {
  std::weak_ptr<Storage> storage;
  Shape shape, strides;
  int64_t offset = 0;
  DType dtype = DType::f32;
};
struct CachedFp8Input {
  std::weak_ptr<Storage> source;
  WeakTensor data, scales;
  backend::QuantSpec spec;
};

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::bf16;
  bool cache_casts = true;
  std::shared_ptr<const Overrides> overrides;  // null: none
  int enabled_depth = 0;                       // enabled guards alive; the cache's lifetime
  std::string module_path;
  std::map<CastKey, CachedCast> cache;
  std::map<Fp8InputKey, CachedFp8Input> fp8_inputs;  // cleared with the cast cache
  AutocastStats stats;
};

AutocastState& state();

// Registers amp's state with autograd's checkpoints (checkpoint_state.cpp): called once, at
// static initialisation of the file that owns state(), so that every program using autocast
// has it.
bool register_checkpoint_state();

// True when the current module path, or a scope above it, matches an fp32_modules glob.
bool in_fp32_module(const AutocastState& s);

}  // namespace mixprec::amp::detail
