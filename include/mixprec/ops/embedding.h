// Embedding lookup. Backward scatter-adds gradient rows into an f32 buffer (f64 for f64) and
// hands that f32 gradient on unrounded, so repeated ids sum exactly as far as f32 allows and
// a bf16 weight cast from f32 masters gets an f32 gradient. Each gradient row is summed by one
// thread in position order, so the result never depends on the thread count.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// ids (i32/i64) [...] and weight [V, D] -> [..., D]; ids outside [0, V) are errors.
Tensor embedding(const Tensor& ids, const Tensor& weight);

}  // namespace mixprec
