// The elementwise functions of two tensors (kernel_types.h: PairOp) and their partial
// derivatives, in the arithmetic type A (f32 on the cpu backend, f64 for f64 tensors and on
// the reference backend). Forward formulas are ATen 1.13's (Loss.cpp, pow; kl_div's
// composite xlogy(t, t) - t·x; BCE-with-logits in its max-shifted form); derivatives are
// derivatives.yaml's, with their edge values: l1's 0 at x == t; smooth_l1's target gradient
// as the input kernel with the arguments swapped (-1 for both at beta = 0, x == t); kl_div's
// NaN target gradient at t == 0; BCE's unclamped target gradient -logit(x).
#pragma once

#include <algorithm>
#include <cmath>

#include "line_math.h"
#include "mixprec/backend/kernel_types.h"

namespace mixprec::backend {

template <class A>
A log_sigmoid(A z) {
  return std::min(z, A(0)) - std::log1p(std::exp(-std::fabs(z)));
}

// has_pw: pos_weight given (pw its element; 1 otherwise).
template <class A>
A pair_value(const PairFunction& f, A x, A t, A pw, bool has_pw) {
  const A d = x - t;
  switch (f.op) {
    case PairOp::mse:
      return d * d;
    case PairOp::l1:
      return std::fabs(d);
    case PairOp::smooth_l1: {
      const A a = std::fabs(d), beta = static_cast<A>(f.beta);
      return f.beta == 0 || a >= beta ? a - A(0.5) * beta : A(0.5) * a * a / beta;
    }
    case PairOp::kl_div:
      return (t == 0 ? A(0) : t * std::log(t)) - t * x;
    case PairOp::kl_div_log_target:
      return std::exp(t) * (t - x);
    case PairOp::bce_logits: {
      const A max_val = std::max(-x, A(0));
      const A log_term = std::log(std::exp(-max_val) + std::exp(-x - max_val));
      if (!has_pw) return (1 - t) * x + max_val + log_term;
      const A lw = (pw - 1) * t + 1;
      return (1 - t) * x + lw * (log_term + max_val);
    }
    case PairOp::pow:
      return std::pow(x, t);
    case PairOp::bce:
      return -(t * std::max(std::log(x), A(-100)) + (1 - t) * std::max(std::log(1 - x), A(-100)));
  }
  return d;
}

template <class A>
A smooth_l1_slope(A x, A t, A beta) {  // smooth_l1_loss_backward's kernel
  const A d = x - t;
  return d <= -beta ? A(-1) : (d >= beta ? A(1) : d / beta);
}

// {∂/∂x, ∂/∂t} of f at one element.
template <class A>
std::pair<A, A> pair_slopes(const PairFunction& f, A x, A t, A pw, bool has_pw) {
  const A d = x - t;
  switch (f.op) {
    case PairOp::mse:
      return {2 * d, -2 * d};
    case PairOp::l1:
      return {sign_or_zero(d), -sign_or_zero(d)};
    case PairOp::smooth_l1: {
      const auto beta = static_cast<A>(f.beta);
      return {smooth_l1_slope(x, t, beta), smooth_l1_slope(t, x, beta)};
    }
    case PairOp::kl_div:  // xlogy's gradient log(t) + t/t (NaN at t == 0), minus x
      return {-t, (t != 0 ? std::log(t) : A(0)) + t / t - x};
    case PairOp::kl_div_log_target:
      return {-std::exp(t), std::exp(t) * (t - x + 1)};
    case PairOp::bce_logits: {
      const A sig = 1 / (1 + std::exp(-x));
      if (!has_pw) return {sig - t, -x};
      return {(pw * t + 1 - t) * sig - pw * t, log_sigmoid(-x) - pw * log_sigmoid(x)};
    }
    case PairOp::pow:  // pow_backward_self / _exponent: 0 for t == 0, and where x == 0 <= t
      return {t == 0 ? A(0) : t * std::pow(x, t - 1),
              x == 0 && t >= 0 ? A(0) : std::pow(x, t) * std::log(x)};
    case PairOp::bce:  // the input slope's denominator floored at the f32 1e-12, as ATen
      return {(x - t) / std::max(x * (1 - x), static_cast<A>(1e-12f)),
              std::log(1 - x) - std::log(x)};
  }
  return {A(0), A(0)};
}

}  // namespace mixprec::backend
