// Embedding kernels: a row gather forward, and a deterministic scatter-add backward that
// buckets positions by id so each gradient row is summed by one thread in position order.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

// ids [...] contiguous i32/i64, weight [V, D] contiguous -> [..., D] of weight's dtype.
// An id outside [0, V) is an Error naming the value and its position.
Tensor embedding_forward(const Tensor& ids, const Tensor& weight);

// dweight [V, D] f32 (f64 when acc is f64): row v = sum of the dy rows whose id is v, added in
// position order (the same bits on any thread count); zero rows for unused ids.
// dy [..., D]: ids' shape plus D, any floating dtype and layout.
Tensor embedding_backward(const Tensor& ids, const Tensor& dy, int64_t V, DType acc);

}  // namespace mixprec::cpu
