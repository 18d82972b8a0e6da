// Numerically stable softmax and log-softmax along one dim (max subtracted, f32 math).
// The last dim is the fast path; another dim costs a transposed copy in and out. Backward
// recomputes the probabilities from the saved input and per-row f32 statistics, so a bf16
// gradient is the f32 gradient rounded once. A 0-d tensor counts as one element (dim 0 or -1).
#pragma once

#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

}  // namespace mixprec
