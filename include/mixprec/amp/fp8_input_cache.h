// Linears that save their input in FP8 (policy save_fp8_activations) cast a tensor that several
// of them read (attention's q/k/v input, SwiGLU's gate/up input) once: the first cast of a
// tensor by a spec in an autocast region serves the later ones, so the saved FP8 copy is one,
// not one per linear. The cache holds nothing: a cast is shared while the linears that saved it
// keep it, and the source tensor lives (both are watched, not held).
#pragma once

#include "mixprec/backend/quantized.h"

namespace mixprec::amp {

// x [rows, cols] quantized by spec with the current backend, or the region's earlier cast of
// the same tensor (storage, offset, shape) by the same spec. Outside autocast: no cache.
backend::Quantized quantize_once(const Tensor& x, const backend::QuantSpec& spec);

}  // namespace mixprec::amp
