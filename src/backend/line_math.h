// prod, logsumexp, the p-norms and cumsum along n of a contiguous [outer, n, inner] array,
// and their gradients, in the arithmetic type A (f32 on the cpu backend, f64 for f64 tensors
// and on the reference backend). The gradients follow PyTorch 1.13's FunctionsManual rules:
// prod_backward (zeros handled without dividing), logsumexp_backward (g·e^(x - result)),
// norm_backward (sgn(x)·|x|^(p-1)/norm^(p-1), 0 where norm == 0; inf: the gradient split
// evenly between the elements that tie for the maximum) and cumsum_backward (reversed cumsum).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "mixprec/backend/kernel_types.h"

namespace mixprec::backend {

// sign(x) with sign(NaN) = 0, as torch.sgn in 1.13.
template <class A>
A sign_or_zero(A v) {
  return v > 0 ? A(1) : (v < 0 ? A(-1) : A(0));
}

template <class A>
A line_reduce(const LineFunction& f, const A* l, int64_t n, int64_t s) {
  switch (f.op) {
    case LineOp::prod: {
      A r = 1;
      for (int64_t k = 0; k < n; ++k) r *= l[k * s];
      return r;
    }
    case LineOp::logsumexp: {  // shifted by the max (NaN wins; an infinite max shifts by 0)
      A m = -std::numeric_limits<A>::infinity();
      for (int64_t k = 0; k < n; ++k)
        if (std::isnan(l[k * s]) || l[k * s] > m) m = std::isnan(m) ? m : l[k * s];
      if (std::isinf(m)) m = 0;
      A sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(l[k * s] - m);
      return std::log(sum) + m;
    }
    case LineOp::pnorm: {
      A sum = 0;
      const auto p = static_cast<A>(f.p);
      for (int64_t k = 0; k < n; ++k) {
        const A a = std::fabs(l[k * s]);
        sum += f.p == 1 ? a : (f.p == 2 ? a * a : std::pow(a, p));
      }
      return f.p == 1 ? sum : (f.p == 2 ? std::sqrt(sum) : std::pow(sum, A(1) / p));
    }
    case LineOp::inf_norm: {
      A m = 0;
      for (int64_t k = 0; k < n; ++k) {
        const A a = std::fabs(l[k * s]);
        if (std::isnan(a) || a > m) m = std::isnan(m) ? m : a;
      }
      return m;
    }
    case LineOp::cumsum:
      break;
  }
  return std::numeric_limits<A>::quiet_NaN();
}

// out: [outer, inner], or [outer, n, inner] for cumsum.
template <class A>
void line_forward_math(const LineFunction& f, const A* x, A* out, ReduceGeometry g) {
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t c = 0; c < g.inner; ++c) {
      const int64_t base = o * g.n * g.inner + c;
      if (f.op == LineOp::cumsum) {
        A run = 0;
        for (int64_t k = 0; k < g.n; ++k) out[base + k * g.inner] = run += x[base + k * g.inner];
      } else {
        out[o * g.inner + c] = line_reduce(f, x + base, g.n, g.inner);
      }
    }
}

// out [outer, n, inner] = grad·∂f/∂x; r and grad are [outer, inner] ([outer, n, inner] for
// cumsum's grad).
template <class A>
void line_backward_math(const LineFunction& f, const A* x, const A* r, const A* grad, A* out,
                        ReduceGeometry g) {
  bool any_zero = false;  // prod: PyTorch divides by x unless the input holds a zero anywhere
  if (f.op == LineOp::prod)
    for (int64_t i = 0; i < g.outer * g.n * g.inner; ++i) any_zero = any_zero || x[i] == 0;
  std::vector<A> before(static_cast<size_t>(g.n));
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t c = 0; c < g.inner; ++c) {
      const int64_t base = o * g.n * g.inner + c, s = g.inner;
      const A* l = x + base;
      A* d = out + base;
      const A gr = f.op == LineOp::cumsum ? A(0) : grad[o * g.inner + c];
      const A res = f.op == LineOp::cumsum ? A(0) : r[o * g.inner + c];
      switch (f.op) {
        case LineOp::prod:
          if (!any_zero) {
            for (int64_t k = 0; k < g.n; ++k) d[k * s] = gr * (res / l[k * s]);  // PyTorch's order
          } else {  // the product of the others: exclusive products from both ends
            A run = 1;
            for (int64_t k = 0; k < g.n; ++k) before[static_cast<size_t>(k)] = run, run *= l[k * s];
            run = 1;
            for (int64_t k = g.n; k-- > 0;)
              d[k * s] = gr * before[static_cast<size_t>(k)] * run, run *= l[k * s];
          }
          break;
        case LineOp::logsumexp:
          for (int64_t k = 0; k < g.n; ++k) d[k * s] = gr * std::exp(l[k * s] - res);
          break;
        case LineOp::pnorm:
          for (int64_t k = 0; k < g.n; ++k) {
            const A v = l[k * s];
            if (f.p == 1)
              d[k * s] = gr * sign_or_zero(v);
            else if (res == 0)
              d[k * s] = 0;
            else if (f.p == 2)
              d[k * s] = v * (gr / res);
            else
              d[k * s] = sign_or_zero(v) * std::pow(std::fabs(v), static_cast<A>(f.p - 1)) * gr /
                         std::pow(res, static_cast<A>(f.p - 1));
          }
          break;
        case LineOp::inf_norm: {
          int64_t ties = 0;
          for (int64_t k = 0; k < g.n; ++k)
            ties += std::fabs(l[k * s]) == res || std::isnan(l[k * s]) ? 1 : 0;
          for (int64_t k = 0; k < g.n; ++k) {
            const A v = l[k * s];
            const bool at_max = std::fabs(v) == res || std::isnan(v);
            d[k * s] = at_max ? sign_or_zero(v) * gr / static_cast<A>(ties) : A(0);
          }
          break;
        }
        case LineOp::cumsum: {
          A run = 0;
          for (int64_t k = g.n; k-- > 0;) d[k * s] = run += grad[base + k * s];
          break;
        }
      }
    }
}

}  // namespace mixprec::backend
