// Comparisons, as torch.eq / ne / lt / le / gt / ge: boolean results (no gradient) of a and b
// broadcast. Two tensors compare in promote(a, b) (f32 0.1 == f64 0.1 is false, as in
// PyTorch); a number beside a floating tensor is first rounded to the tensor's dtype (a
// Python scalar does not promote: f32 0.1 == 0.1 is true). NaN is unequal to everything.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec {

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

}  // namespace mixprec
