// Softmax / log-softmax kernels over the last dim: f32 math (f64 for f64), one pass to read
// a row into an f32 buffer, one to write it.
#pragma once

#include <cstdint>
#include "mixprec/backend/kernel_types.h"

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

// Per-row statistics the backward pass recomputes probabilities from: [rows] f32 (f64 for
// f64). Saving these and the input, rather than the rounded output, makes a bf16 backward
// exactly the f32 backward rounded once.
using backend::SoftmaxStats;

// x [..., D] contiguous (f64/f32/bf16/f16) -> new tensor of x's shape and dtype: softmax
// (log = false) or log-softmax (log = true) of each row, the row max subtracted first.
// Fills *stats when given.
Tensor softmax_lastdim(const Tensor& x, bool log, SoftmaxStats* stats = nullptr);
// Backward from the input x [..., D] (contiguous), its stats, and dy (x's shape, any floating
// dtype and layout), with p = exp((x - max) - log_sum): softmax dx = p * (dy - <dy, p>),
// log-softmax dx = dy - p * sum(dy). dx has x's dtype.
Tensor softmax_lastdim_backward(const Tensor& x, const SoftmaxStats& stats, const Tensor& dy,
                                bool log);

// An incoming gradient as a contiguous tensor that kernels computing in f32 (acc = f32) or
// f64 (acc = f64) can load row by row with load_grad_row: f64 for f64 kernels; otherwise its
// own dtype, f64 narrowed to f32. Non-floating gradients are errors. (Shared by the
// normalisation and embedding kernels.)
Tensor grad_rows(const Tensor& dy, DType acc, const char* where);
void load_grad_row(DType dtype, const void* src, float* dst, int64_t n);
void load_grad_row(DType dtype, const void* src, double* dst, int64_t n);

}  // namespace mixprec::cpu
