// The casts behind the op hooks: an op's effective category (table, op overrides, fp32
// modules), the target dtype of each input, and the cache of weight casts.
#include "autocast_state.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/autograd/node.h"

#include <vector>

namespace mixprec::amp {
namespace {

// f64 stays f64 (as in PyTorch: f64 math is deliberate); fp8 stays a storage format.
bool is_lowerable(DType d) {
  return is_computable(d) && d != DType::f64;
}

// The dtype one input takes under `category`, before any promotion across inputs.
DType single_target(CastCategory category, DType d, DType autocast_dtype) {
  switch (category) {
    case CastCategory::lower_precision:
      return is_lowerable(d) ? autocast_dtype : d;
    case CastCategory::fp32:
      return is_narrow_compute(d) ? DType::f32 : d;
    case CastCategory::promote:
    case CastCategory::as_given:
      return d;
  }
  return d;
}

Tensor cast(detail::AutocastState& s, const Tensor& t, DType target) {
  const bool cacheable = s.cache_casts && t.requires_grad() && t.is_leaf();
  if (!cacheable) {
    ++s.stats.casts;
    return t.to(target);
  }
  const detail::CastKey key{t.autograd_meta(), target, GradMode::is_enabled()};
  auto it = s.cache.find(key);
  // A backward (without retain_graph) frees the cast's node: the next step in the same
  // region needs a fresh cast to reach the weight again.
  if (it != s.cache.end() &&
      !(it->second.cast.grad_fn() && it->second.cast.grad_fn()->released())) {
    ++s.stats.cache_hits;
    return it->second.cast;
  }
  ++s.stats.casts;
  Tensor c = t.to(target);
  s.cache.insert_or_assign(key, detail::CachedCast{t, c});
  return c;
}

}  // namespace

const char* category_name(CastCategory c) {
  switch (c) {
    case CastCategory::lower_precision:
      return "lower_precision";
    case CastCategory::fp32:
      return "fp32";
    case CastCategory::promote:
      return "promote";
    case CastCategory::as_given:
      return "as_given";
  }
  return "?";
}

CastCategory effective_category(AutocastOpId op) {
  const detail::AutocastState& s = detail::state();
  if (detail::in_fp32_module(s)) return CastCategory::fp32;
  if (s.overrides) {
    if (const auto& o = s.overrides->op[static_cast<std::size_t>(op.index())]) return *o;
    return op.category(s.overrides->table);
  }
  return op.category();
}

namespace detail {

void autocast_cast(AutocastOpId op, const Tensor* const* in, Tensor* out, std::size_t n) {
  AutocastState& s = state();
  const CastCategory category = effective_category(op);
  std::vector<DType> target(n);
  // Inputs that must share a dtype (a promote op, whatever its override) meet at the widest
  // of their per-input targets; so do those of an op mixprec casts but PyTorch's lists leave
  // as given (layernorm's input and weight under torch_cpu): its kernel takes one dtype.
  const bool promote_all =
      op.category() == CastCategory::promote ||
      (category == CastCategory::as_given && op.category() != CastCategory::as_given);
  bool any_floating = false;
  DType widest = DType::f32;
  for (std::size_t i = 0; i < n; ++i) {
    if (!in[i]->defined()) continue;
    const DType d = in[i]->dtype();
    target[i] = is_floating(d) ? single_target(category, d, s.dtype) : d;
    if (promote_all && is_floating(d)) {
      widest = any_floating ? mixprec::promote(widest, target[i]) : target[i];
      any_floating = true;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!in[i]->defined()) continue;
    const DType d = in[i]->dtype();
    const DType to = promote_all && is_floating(d) ? widest : target[i];
    if (to != d) out[i] = cast(s, *in[i], to);
  }
}

}  // namespace detail

AutocastList::AutocastList(AutocastOpId op, const std::vector<Tensor>& in) : in_(&in) {
  if (!detail::t_autocast_active) return;
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : in) ptrs.push_back(&t);
  std::vector<Tensor> out(in.size());
  detail::autocast_cast(op, ptrs.data(), out.data(), in.size());
  bool any = false;
  for (const Tensor& t : out) any = any || t.defined();
  if (!any) return;
  cast_ = in;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (out[i].defined()) cast_[i] = out[i];
}

}  // namespace mixprec::amp
