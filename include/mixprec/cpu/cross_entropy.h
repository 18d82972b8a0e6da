// Fused cross-entropy from logits: per-row log-sum-exp and pick in one pass over the logits,
// f32 math (f64 for f64). The forward keeps two numbers per row for the backward pass.
#pragma once

#include <cstdint>
#include "mixprec/backend/kernel_types.h"

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

using backend::CrossEntropyForward;

// logits [N, V] contiguous (f64/f32/bf16/f16), targets [N] contiguous i32/i64. A target other
// than ignore_index outside [0, V) is an Error naming the value and its row.
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                          int64_t ignore_index);

// dlogits [N, V] in logits' dtype: (softmax(x) - onehot(target)) * scale on kept rows, zero on
// ignored rows; scale = grad_out / n_valid. Reads the logits once and writes dlogits once.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                              const CrossEntropyForward& saved, int64_t ignore_index, double scale);

}  // namespace mixprec::cpu
