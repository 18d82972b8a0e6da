// One FP8 cast per linear input tensor and spec in an autocast region (fp8_input_cache.h).
#include "mixprec/amp/fp8_input_cache.h"

#include "autocast_state.h"
#include "mixprec/backend/backend.h"

namespace mixprec::amp {

namespace {

detail::WeakTensor watch(const Tensor& t) {
  return {t.storage(), t.shape(), t.strides(), t.offset(), t.dtype()};
}

// The tensor again, if its storage still lives.
Tensor revive(const detail::WeakTensor& w) {
  std::shared_ptr<Storage> storage = w.storage.lock();
  if (!storage) return Tensor();
  return Tensor(std::make_shared<TensorImpl>(
      TensorImpl{std::move(storage), w.shape, w.strides, w.offset, w.dtype, Device::cpu}));
}

}  // namespace

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
  if (it != s.fp8_inputs.end() && it->second.source.lock() == x.storage()) {
    backend::Quantized q{revive(it->second.data), revive(it->second.scales), it->second.spec};
    if (q.data.defined() && q.scales.defined()) return q;
  }
  backend::Quantized q = be.quantize(x, spec);
  s.fp8_inputs.insert_or_assign(
      key, detail::CachedFp8Input{x.storage(), watch(q.data), watch(q.scales), q.spec});
  return q;
}

}  // namespace mixprec::amp
