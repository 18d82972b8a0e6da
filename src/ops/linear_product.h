// One linear layer's products, shared by linear and grouped_linear (private to src/ops): the
// operands as its GEMMs read them, and the forward and backward products into tensors the
// caller allocates, so a caller can run many of them from its own threads.
#pragma once

#include <cstdint>

#include "mixprec/amp/policy.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::detail {

struct LinearProduct {
  Tensor x2;  // x as [rows, In], rounded under the matmul precision
  Tensor w;   // weight [Out, In], rounded the same way
  Tensor b;   // bias [Out] as given (undefined: none); the forward only
  Shape x_shape;
  DType x_dtype = DType::f32;
  amp::MatmulPrecision precision = amp::MatmulPrecision::highest;
  int64_t rows = 0, in = 0, out = 0;

  // Checks x [..., In], weight [Out, In] and bias (after autocast) and makes the operands;
  // `op` names the caller in errors.
  static LinearProduct prepare(const char* op, const Tensor& x, const Tensor& weight,
                               const Tensor& bias);

  Shape y_shape() const;
  // y [rows, Out] (x's dtype, allocated) = x2 · wᵀ + b
  void forward(const Tensor& y) const;
  // dY as [rows, Out], contiguous (what the bias gradient sums), and as the backward
  // products read it (rounded under the precision).
  Tensor grad_rows(const Tensor& dy) const;
  Tensor grad_operand(const Tensor& rows) const;
  // dX [rows, In] (x's dtype) = dY · W
  void grad_x(const Tensor& gp, const Tensor& dx) const;
  // dW [Out, In] (f32, f64 for f64: a weight gradient is never rounded to bf16/f16) = dYᵀ · X
  void grad_w(const Tensor& gp, const Tensor& dw) const;
  DType grad_w_dtype() const;
};

}  // namespace mixprec::detail
