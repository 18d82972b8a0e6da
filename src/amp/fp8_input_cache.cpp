// One FP8 cast per linear input tensor and spec in an autocast region (fp8_input_cache.h).
#include "mixprec/amp/fp8_input_cache.h"

#include "autocast_state.h"
#include "mixprec/backend/backend.h"

namespace mixprec::amp {

backend::Quantized quantize_once(const Tensor& x, const backend::QuantSpec& spec) {
  const backend::Backend& be = backend::current();
  if (!detail::t_autocast_active) return be.quantize(x, spec);
  detail::AutocastState& s = detail::state();
  const detail::Fp8InputKey key{x.storage().get(),
                                x.offset(),
                                x.shape(),
                                spec.element,
                                spec.block.rows,
                                spec.block.cols,
                                static_cast<int>(spec.rule),
                                spec.pow2};
  const auto it = s.fp8_inputs.find(key);
  if (it != s.fp8_inputs.end() && it->second.source.lock() == x.storage()) return it->second.cast;
  backend::Quantized q = be.quantize(x, spec);
  s.fp8_inputs.insert_or_assign(key, detail::CachedFp8Input{x.storage(), q});
  return q;
}

}  // namespace mixprec::amp
