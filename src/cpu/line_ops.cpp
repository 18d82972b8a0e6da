// Line ops and loss terms on operands widened once to the accumulation type.
#include "mixprec/cpu/line_ops.h"

#include <vector>

#include "../backend/line_math.h"
#include "../backend/pair_math.h"
#include "mixprec/cpu/elementwise.h"

namespace mixprec::cpu {
namespace {

Tensor widened(const Tensor& t, DType acc) {
  return t.to(acc).contiguous();
}

template <class A>
Tensor line_forward_as(const LineFunction& f, const Tensor& x, ReduceGeometry g, DType acc) {
  const Tensor xa = widened(x, acc);
  const Shape shape =
      f.op == backend::LineOp::cumsum ? Shape{g.outer, g.n, g.inner} : Shape{g.outer, g.inner};
  Tensor out = Tensor::empty(shape, acc);
  backend::line_forward_math<A>(f, xa.data<A>(), out.data<A>(), g);
  return out;
}

template <class A>
Tensor line_backward_as(const LineFunction& f, const Tensor& x, const Tensor& r, const Tensor& gr,
                        ReduceGeometry g, DType acc) {
  const Tensor xa = widened(x, acc), ga = widened(gr, acc);
  const Tensor ra = r.defined() ? widened(r, acc) : Tensor();
  Tensor out = Tensor::empty({g.outer, g.n, g.inner}, acc);
  backend::line_backward_math<A>(f, xa.data<A>(), ra.defined() ? ra.data<A>() : nullptr,
                                 ga.data<A>(), out.data<A>(), g);
  return out;
}

template <class A>
Tensor pair_forward_as(const PairFunction& f, const Tensor& x, const Tensor& t, const Tensor& pw,
                       DType acc) {
  const Tensor xa = widened(x, acc), ta = widened(t, acc);
  const Tensor pa = pw.defined() ? widened(pw, acc) : Tensor();
  Tensor out = Tensor::empty(x.shape(), acc);
  const A *xp = xa.data<A>(), *tp = ta.data<A>(), *pp = pa.defined() ? pa.data<A>() : nullptr;
  A* o = out.data<A>();
  for (int64_t i = 0; i < x.numel(); ++i)
    o[i] = backend::pair_value<A>(f, xp[i], tp[i], pp ? pp[i] : A(1), pp != nullptr);
  return out;
}

template <class A>
std::array<Tensor, 2> pair_backward_as(const PairFunction& f, const Tensor& x, const Tensor& t,
                                       const Tensor& pw, const Tensor& g, bool want_x, bool want_t,
                                       DType acc) {
  const Tensor xa = widened(x, acc), ta = widened(t, acc), ga = widened(g, acc);
  const Tensor pa = pw.defined() ? widened(pw, acc) : Tensor();
  Tensor dx = want_x ? Tensor::empty(x.shape(), acc) : Tensor();
  Tensor dt = want_t ? Tensor::empty(x.shape(), acc) : Tensor();
  const A *xp = xa.data<A>(), *tp = ta.data<A>(), *gp = ga.data<A>();
  const A* pp = pa.defined() ? pa.data<A>() : nullptr;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const auto [sx, st] =
        backend::pair_slopes<A>(f, xp[i], tp[i], pp ? pp[i] : A(1), pp != nullptr);
    if (want_x) dx.data<A>()[i] = gp[i] * sx;
    if (want_t) dt.data<A>()[i] = gp[i] * st;
  }
  return {dx, dt};
}

}  // namespace

Tensor line_forward(const LineFunction& f, const Tensor& x, ReduceGeometry g) {
  const DType acc = compute_dtype({x.dtype()});
  return acc == DType::f64 ? line_forward_as<double>(f, x, g, acc)
                           : line_forward_as<float>(f, x, g, acc);
}

Tensor line_backward(const LineFunction& f, const Tensor& x, const Tensor& result,
                     const Tensor& grad, ReduceGeometry g, DType dtype) {
  const DType acc = compute_dtype({x.dtype(), grad.dtype()});
  const Tensor out = acc == DType::f64 ? line_backward_as<double>(f, x, result, grad, g, acc)
                                       : line_backward_as<float>(f, x, result, grad, g, acc);
  return out.to(dtype);
}

Tensor pair_forward(const PairFunction& f, const Tensor& x, const Tensor& t,
                    const Tensor& pos_weight) {
  const DType acc = compute_dtype({x.dtype(), t.dtype()});
  return acc == DType::f64 ? pair_forward_as<double>(f, x, t, pos_weight, acc)
                           : pair_forward_as<float>(f, x, t, pos_weight, acc);
}

std::array<Tensor, 2> pair_backward(const PairFunction& f, const Tensor& x, const Tensor& t,
                                    const Tensor& pos_weight, const Tensor& g, bool want_x,
                                    bool want_t) {
  const DType acc = compute_dtype({x.dtype(), t.dtype(), g.dtype()});
  return acc == DType::f64 ? pair_backward_as<double>(f, x, t, pos_weight, g, want_x, want_t, acc)
                           : pair_backward_as<float>(f, x, t, pos_weight, g, want_x, want_t, acc);
}

}  // namespace mixprec::cpu
