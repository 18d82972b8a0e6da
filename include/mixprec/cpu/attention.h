// Fused (flash-style) scaled-dot-product attention kernels. Per head, query rows are taken in
// blocks; each block meets the key blocks one at a time (scores by GEMM, online softmax with a
// running max and sum, P·V accumulated), so no T×T matrix ever exists. Math is f32 (f64 for
// f64) on rows widened from storage; outputs are rounded once.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "mixprec/cpu/row_io.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

struct AttentionForward {
  Tensor out;      // [B, H, T, Dh], dtype of q
  Tensor lse;      // [B, H, T], log-sum-exp of each scaled score row: f32 (f64 for f64 inputs)
  Tensor out_acc;  // [B, H, T, Dh] f32, the output before rounding (bf16/f16 q, when asked)
};

// q, k, v: contiguous [B, H, T, Dh] of one dtype (f64, f32, bf16, f16); scale > 0.
// Causal: query i sees keys 0..i. Work items are (head, query chunk): bits never depend on
// the thread count.
// keep_acc_out: for bf16/f16 inputs also return the unrounded f32 output, which backward
// uses for D = rowsum(dO∘O): D feeds dS = P∘(dP − D), where the difference cancels, so a
// rounded O would cost gradients several bf16 ulps (flash-attention uses the rounded one).
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                   double scale, bool keep_acc_out = false);

struct AttentionGrads {
  Tensor dq, dk, dv;  // [B, H, T, Dh], dtype of q
};

// Recomputes the probabilities block by block from q, k and lse. `dout` [B, H, T, Dh] is
// contiguous, of q's dtype or (for f32/bf16/f16 inputs) f32; `out` is the forward output
// or its f32 out_acc; the rest as attention_forward made it. One work item per head, blocks in a
// fixed order: bits never depend on the thread count.
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  bool causal, double scale);

// Row helpers shared by both passes, on the softmax row kernels (softmax_row_ops.h).
// x[i] = exp(x[i] * scale - shift) in place for i < n; returns their sum in a fixed order.
float exp_scaled_sum(float* x, float scale, float shift, int64_t n);
double exp_scaled_sum(double* x, double scale, double shift, int64_t n);
// max(x[0..n)), n >= 1.
float row_max(const float* x, int64_t n);
double row_max(const double* x, int64_t n);

namespace attention_detail {

// Block sizes of both passes: query rows and keys per block.
constexpr int64_t kBr = 128;
constexpr int64_t kBc = 128;

// The GEMM dtype of math type A.
template <class A>
constexpr DType acc_dtype() {
  return std::is_same_v<A, double> ? DType::f64 : DType::f32;
}

// Per-thread scratch buffer `slot` of at least n elements (kept between calls: the kernels
// run per head, and fresh large allocations would page-fault every time).
template <class A>
A* scratch(int slot, int64_t n) {
  thread_local std::vector<A> buffers[10];
  auto& b = buffers[slot];
  if (b.size() < static_cast<size_t>(n)) b.resize(static_cast<size_t>(n));
  return b.data();
}

// `n` contiguous elements of src as acc_t<S>: the storage itself when it already is that type,
// else widened into scratch `slot`.
template <class S>
const acc_t<S>* widened(const S* src, int64_t n, int slot) {
  if constexpr (std::is_same_v<S, acc_t<S>>) return src;
  return as_acc(src, scratch<acc_t<S>>(slot, n), n);
}

}  // namespace attention_detail

}  // namespace mixprec::cpu
