// Input checks shared by the ops (private to src/ops).
#pragma once

#include <string>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// Throws naming `op` unless t is a defined, non-meta tensor of f64, f32, bf16 or f16.
inline void check_compute_input(const char* op, const Tensor& t) {
  MIXPREC_CHECK(t.defined(), op, "undefined input");
  MIXPREC_CHECK(!t.is_meta(), op, "meta tensors have no data");
  const DType dt = t.dtype();
  MIXPREC_CHECK(
      is_computable(dt), op,
      std::string("unsupported dtype ") + dtype_name(dt) + " (use f64, f32, bf16 or f16)");
}

}  // namespace mixprec
