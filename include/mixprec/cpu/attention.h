// Fused (flash-style) scaled-dot-product attention kernels. Per head, query rows are taken in
// blocks; each block meets the key blocks one at a time (scores by GEMM, online softmax with a
// running max and sum, P·V accumulated), so no T×T matrix ever exists. Math is f32 (f64 for
// f64) on rows widened from storage; outputs are rounded once. With native bf16 products
// (native_bf16 below) bf16 rows are read as stored and P, dS rounded to bf16 for the products.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>
#include "mixprec/backend/kernel_types.h"

#include "mixprec/cpu/gemm.h"
#include "mixprec/cpu/row_io.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

using backend::AttentionForward;

// Where the rows of a [B, H, T, Dh] tensor are: element (b, h, r, c) of head i = b·H + h at
// data + start(i) + r·row + c. The kernels read and write any such layout in place: a
// contiguous tensor, or the [B, T, H, Dh] memory of a model's projections seen as
// [B, H, T, Dh] (no copies on the way in or out).
struct HeadRows {
  int64_t heads = 1;            // H
  int64_t batch = 0, head = 0;  // strides of b and h
  int64_t row = 0;              // stride of r
  int64_t start(int64_t i) const { return i / heads * batch + i % heads * head; }
};

// True when t ([B, H, T, Dh]) has adjacent Dh elements and rows at least Dh apart, so its
// HeadRows describe a matrix per head the GEMM can read.
using backend::rows_are_dense;
HeadRows head_rows(const Tensor& t);  // requires rows_are_dense(t)
// An uninitialised [B, H, T, Dh] tensor of `dtype` laid out as `like`: [B, T, H, Dh] memory
// seen as [B, H, T, Dh] when like's rows are further apart than its heads, else contiguous.
Tensor empty_like_rows(const Tensor& like, DType dtype);

// q [B, H, T, Dh], k and v [B, Hkv, T, Dh] (H a multiple of Hkv: grouped-query attention,
// read in place, never repeated) of one dtype (f64, f32, bf16, f16) with rows_are_dense;
// scale > 0.
// out is laid out as q (empty_like_rows). Causal: query i sees keys 0..i. Work items are
// (head, query chunk): bits never depend on the thread count or the layouts.
// keep_acc_out: for bf16/f16 inputs also return the unrounded f32 output, which backward
// uses for D = rowsum(dO∘O): D feeds dS = P∘(dP − D), where the difference cancels, so a
// rounded O would cost gradients several bf16 ulps (flash-attention uses the rounded one).
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                   double scale, bool keep_acc_out = false);

using backend::AttentionGrads;

// Recomputes the probabilities block by block from q, k and lse. `dout` [B, H, T, Dh] has
// dense rows, of q's dtype or (for f32/bf16/f16 inputs) f32; `out` is the forward output
// or its f32 out_acc; the rest as attention_forward made it. dq, dk, dv are laid out as q, k, v.
// One work item per head, blocks in a fixed order: bits never depend on the thread count.
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

// Grouped-query attention: the key/value head (of B·Hkv) that query head `head` (of B·H)
// reads. Each key/value head serves H / Hkv consecutive query heads (Hkv = H: its own).
inline int64_t kv_head(int64_t head, int64_t h, int64_t hkv) {
  return head / h * hkv + head % h / (h / hkv);
}

// The GEMM dtype of math type A.
template <class A>
constexpr DType acc_dtype() {
  return std::is_same_v<A, double> ? DType::f64 : DType::f32;
}

// True when T is bf16 and bf16 x bf16 GEMMs run on bf16 dot products (AMX or AVX512-BF16):
// then the products read bf16 rows as stored (no widening) and the operands the kernels make
// (probabilities P, the score gradient dS) are rounded to bf16 for them; softmax and every
// sum stay f32. Elsewhere the products run in f32 on widened rows.
template <class T>
bool native_bf16() {
  if constexpr (std::is_same_v<T, bf16>) return bf16_gemm_is_native();
  return false;
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

// Rows of a matrix in the math type: element (r, c) at p[r·ld + c].
template <class A>
struct Rows {
  const A* p;
  int64_t ld;
  const A* at(int64_t r) const { return p + r * ld; }
};

// `rows` rows of `dh` elements, `ld` apart from src, as acc_t<S>: the storage itself when it
// already is that type, else widened into scratch `slot` (then dh apart).
template <class S>
Rows<acc_t<S>> widened(const S* src, int64_t rows, int64_t dh, int64_t ld, int slot) {
  if constexpr (std::is_same_v<S, acc_t<S>>) {
    return {src, ld};
  } else {
    acc_t<S>* buf = scratch<acc_t<S>>(slot, rows * dh);
    if (ld == dh) {
      load_row(src, buf, rows * dh);
    } else {
      for (int64_t r = 0; r < rows; ++r) load_row(src + r * ld, buf + r * dh, dh);
    }
    return {buf, dh};
  }
}

// Stores `rows` rows of `cols` elements from src (src_ld apart) to dst (dst_ld apart), rounded
// once: in one call when both are contiguous (a P or dS block, a head's output), so a block is
// not rounded one short row per call.
template <class T>
void store_rows(const acc_t<T>* src, int64_t src_ld, T* dst, int64_t dst_ld, int64_t rows,
                int64_t cols) {
  if (src_ld == cols && dst_ld == cols) return store_row(src, dst, rows * cols);
  for (int64_t r = 0; r < rows; ++r) store_row(src + r * src_ld, dst + r * dst_ld, cols);
}

}  // namespace attention_detail

}  // namespace mixprec::cpu
