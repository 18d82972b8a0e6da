// What a checkpoint's recompute repeats of amp's state (autograd/checkpoint_state.h): the
// autocast settings in force at the checkpoint's forward (on/off, dtype, op and module
// overrides, cast caching), the module path, and the matmul precision. Backward runs outside
// the trainer's ComputeScope, so without this a recompute would run in f32 and differ.
#include "mixprec/autograd/checkpoint_state.h"
#include "autocast_state.h"
#include "mixprec/amp/policy.h"

namespace mixprec::amp::detail {
namespace {

struct Snapshot {
  bool enabled;
  DType dtype;
  bool cache_casts;
  std::shared_ptr<const Overrides> overrides;
  std::string module_path;
  MatmulPrecision matmul;
};

// The thread's whole autocast state (cast cache and counters too) and the matmul precision,
// put back when the recompute ends: the recompute is a region of its own and leaves no trace.
struct Reentered {
  AutocastState outer;
  MatmulPrecision outer_matmul;
  ~Reentered() {
    state() = std::move(outer);
    t_autocast_active = state().enabled;
    set_matmul_precision(outer_matmul);
  }
};

StateGuard enter(const Snapshot& s) {
  auto guard = std::make_shared<Reentered>();
  AutocastState& st = state();
  guard->outer = std::move(st);
  guard->outer_matmul = matmul_precision();
  st = AutocastState{};
  st.enabled = s.enabled;
  st.dtype = s.dtype;
  st.cache_casts = s.cache_casts;
  st.overrides = s.overrides;
  st.module_path = s.module_path;
  st.enabled_depth = s.enabled ? 1 : 0;  // its own cast cache, from now to the guard's end
  t_autocast_active = s.enabled;
  set_matmul_precision(s.matmul);
  return guard;
}

StateEntry capture() {
  const AutocastState& st = state();
  Snapshot s{st.enabled,   st.dtype,       st.cache_casts,
             st.overrides, st.module_path, matmul_precision()};
  return [s = std::move(s)] { return enter(s); };
}

}  // namespace

bool register_checkpoint_state() {
  mixprec::register_checkpoint_state(&capture);
  return true;
}

}  // namespace mixprec::amp::detail
