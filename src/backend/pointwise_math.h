// The pointwise functions of ops/pointwise.h and their derivatives, one formula each, in the
// arithmetic type T: f32 for the cpu backend's f32/bf16/f16 tensors, f64 for f64 tensors and
// for every tensor on the reference backend. The derivatives are those of PyTorch's
// derivatives.yaml, written in terms of x (a recomputed f(x) where PyTorch reads its saved
// result), so a bf16 gradient is the f32 one rounded once.
#pragma once

#include <cmath>

#include "mixprec/backend/kernel_types.h"

namespace mixprec::backend {

template <class T>
T pointwise_value(const Pointwise& f, T x) {
  switch (f.op) {
    case PointwiseOp::exp:
      return std::exp(x);
    case PointwiseOp::log:
      return std::log(x);
    case PointwiseOp::log1p:
      return std::log1p(x);
    case PointwiseOp::expm1:
      return std::expm1(x);
    case PointwiseOp::sqrt:
      return std::sqrt(x);
    case PointwiseOp::rsqrt:
      return T(1) / std::sqrt(x);
    case PointwiseOp::reciprocal:
      return T(1) / x;
    case PointwiseOp::tanh:
      return std::tanh(x);
    case PointwiseOp::softplus: {  // log(1 + e^(beta·x)) / beta, linear past the threshold
      const T bx = x * static_cast<T>(f.beta);
      return bx > static_cast<T>(f.threshold) ? x
                                              : std::log1p(std::exp(bx)) / static_cast<T>(f.beta);
    }
    case PointwiseOp::pow:
      return std::pow(x, static_cast<T>(f.exponent));
  }
  return x;
}

// f'(x).
template <class T>
T pointwise_slope(const Pointwise& f, T x) {
  switch (f.op) {
    case PointwiseOp::exp:
    case PointwiseOp::expm1:  // PyTorch: (result + 1)
      return std::exp(x);
    case PointwiseOp::log:
      return T(1) / x;
    case PointwiseOp::log1p:
      return T(1) / (x + T(1));
    case PointwiseOp::sqrt:  // PyTorch: 1 / (2·result)
      return T(1) / (T(2) * std::sqrt(x));
    case PointwiseOp::rsqrt: {  // PyTorch: -0.5·result³
      const T r = T(1) / std::sqrt(x);
      return T(-0.5) * r * r * r;
    }
    case PointwiseOp::reciprocal: {  // PyTorch: -result², never overflowing through x²
      const T r = T(1) / x;
      return -(r * r);
    }
    case PointwiseOp::tanh: {  // PyTorch's tanh_backward: 1 - result²
      const T t = std::tanh(x);
      return T(1) - t * t;
    }
    case PointwiseOp::softplus: {  // PyTorch: z / (z + 1), z = e^(beta·x); 1 past the threshold
      const T bx = x * static_cast<T>(f.beta);
      if (bx > static_cast<T>(f.threshold)) return T(1);
      const T z = std::exp(bx);
      return z / (z + T(1));
    }
    case PointwiseOp::pow:  // PyTorch's pow_backward: 0 for exponent 0, else e·x^(e-1)
      if (f.exponent == 0.0) return T(0);
      return static_cast<T>(f.exponent) * std::pow(x, static_cast<T>(f.exponent - 1.0));
  }
  return T(0);
}

}  // namespace mixprec::backend
