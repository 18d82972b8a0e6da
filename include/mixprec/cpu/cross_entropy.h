// Fused cross-entropy from logits: per-row log-sum-exp and pick in one pass over the logits,
// f32 math (f64 for f64). The forward keeps two numbers per row for the backward pass.
#pragma once

#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

struct CrossEntropyForward {
  Tensor loss;      // [] f32 (f64 for f64 logits): mean over kept rows; NaN when none is kept
  Tensor row_max;   // [N] f32/f64: max of each kept row (0 for ignored rows)
  Tensor log_sum;   // [N] f32/f64: log(sum(exp(x - max))) of each kept row
  int64_t n_valid;  // rows whose target is not ignore_index
};

// logits [N, V] contiguous (f64/f32/bf16/f16), targets [N] contiguous i32/i64. A target other
// than ignore_index outside [0, V) is an Error naming the value and its row.
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                          int64_t ignore_index);

// dlogits [N, V] in logits' dtype: (softmax(x) - onehot(target)) * scale on kept rows, zero on
// ignored rows; scale = grad_out / n_valid. Reads the logits once and writes dlogits once.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                              const CrossEntropyForward& saved, int64_t ignore_index, double scale);

}  // namespace mixprec::cpu
