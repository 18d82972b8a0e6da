// History for the Tensor member functions that make new tensors from one input: views
// (one generic rule for every strided view), copies (contiguous, clone) and casts (to).
// Each records nothing unless grad mode is on and `src` requires grad.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec {

void record_view(const Tensor& src, Tensor& view);
void record_copy(const Tensor& src, Tensor& copy);
void record_cast(const Tensor& src, Tensor& cast);

// x * s in x's dtype (s rounded to f32 unless x is f64), with its backward: the loss scaler's
// multiply and the scale op's, outside autocast.
Tensor scaled(const Tensor& x, double s);

}  // namespace mixprec
