// The pieces linear and matmul are made of, shared with grouped_linear (private to
// src/ops): operands as a product sees them under amp::matmul_precision(), and one GEMM
// into a new tensor.
#pragma once

#include <string>

#include "mixprec/amp/policy.h"
#include "mixprec/backend/backend.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::detail {

// Throws naming `op` unless a and b are defined, non-meta and share a product dtype.
inline void check_float_pair(const char* op, const Tensor& a, const Tensor& b) {
  MIXPREC_CHECK(a.defined() && b.defined(), op, "undefined input");
  MIXPREC_CHECK(a.dtype() == b.dtype(), op,
                std::string("inputs must share a dtype, got ") + dtype_name(a.dtype()) + " and " +
                    dtype_name(b.dtype()) + " (cast one, or use autocast)");
  MIXPREC_CHECK(a.dtype() == DType::f64 || a.dtype() == DType::f32 || a.dtype() == DType::bf16 ||
                    a.dtype() == DType::f16,
                op, std::string("unsupported dtype ") + dtype_name(a.dtype()));
  MIXPREC_CHECK(!a.is_meta() && !b.is_meta(), op, "meta tensors have no data");
}

inline DType acc_dtype(DType t) {
  return accumulate_dtype(t);
}

// The precision an op runs with: the process-wide setting when both operands are f32.
inline amp::MatmulPrecision f32_precision(const Tensor& a, const Tensor& b) {
  return a.dtype() == DType::f32 && b.dtype() == DType::f32 ? amp::matmul_precision()
                                                            : amp::MatmulPrecision::highest;
}

// An f32 operand (detached, contiguous) as `p` has the GEMM see it: high rounds it to TF32
// (nearest even, kept as f32), medium to bf16 (the gemm widens bf16 exactly and accumulates
// in f32). Other dtypes, and highest, pass through.
inline Tensor precision_operand(const Tensor& t, amp::MatmulPrecision p) {
  if (t.dtype() != DType::f32 || p == amp::MatmulPrecision::highest) return t;
  if (p == amp::MatmulPrecision::medium) return t.to(DType::bf16);
  Tensor r = Tensor::empty(t.shape(), DType::f32);
  round_to_tf32(t.data<float>(), r.data<float>(), static_cast<std::size_t>(t.numel()));
  return r;
}

// A gradient arriving in another dtype joins f64 math only as f64; f32/bf16/f16 mix freely.
inline Tensor as_operand(const Tensor& g, DType op_dtype) {
  const bool f64 = g.dtype() == DType::f64 || op_dtype == DType::f64;
  return (f64 ? g.to(op_dtype) : g).contiguous();
}

// C [batch, m, n] (new, dtype `out`) = alpha·op(A)·op(B); A, B contiguous [batch, rows, cols].
inline Tensor batched_product(const Tensor& a, bool ta, const Tensor& b, bool tb, int64_t batch,
                              int64_t m, int64_t n, int64_t k, DType out, float alpha = 1.0f) {
  Tensor c = Tensor::empty({batch, m, n}, out);
  const int64_t a_cols = ta ? m : k, b_cols = tb ? k : n;
  backend::current().gemm(m, n, k, alpha,
                          {a.dtype(), a.raw_data(), a_cols, ta, batch > 1 ? m * k : 0},
                          {b.dtype(), b.raw_data(), b_cols, tb, batch > 1 ? k * n : 0}, 0.0f,
                          {out, c.raw_data(), n, m * n}, batch);
  return c;
}

// matmul of a [..., M, K] by b [K, N] or by b [..., K, N] with a's leading dims, after
// autocast (linalg.cpp): the product every matmul-family op ends in. wide_grad_a/_b: that
// operand's gradient comes back unrounded in f32 (f64 for f64), for an operand broadcast
// before the product, whose gradient broadcast_to then sums and rounds once.
Tensor matmul_product(const Tensor& a, const Tensor& b, bool wide_grad_a = false,
                      bool wide_grad_b = false);

}  // namespace mixprec::detail
