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

// batchmean (sum / input.size(0)) belongs to kl_div; the other losses refuse it.
inline void check_not_batchmean(const char* op, bool batchmean) {
  MIXPREC_CHECK(!batchmean, op, "reduction batchmean is kl_div's alone (use mean, sum or none)");
}

}  // namespace mixprec
