// Reference line ops and loss terms: line_math.h's and pair_math.h's formulas in f64.
#include "../line_math.h"
#include "../pair_math.h"
#include "reference_kernels.h"

namespace mixprec::backend::reference {

Tensor line_forward(const LineFunction& f, const Tensor& x, ReduceGeometry g) {
  const std::vector<double> xv = values(x);
  const bool keep = f.op == LineOp::cumsum;
  std::vector<double> out(static_cast<size_t>(g.outer * (keep ? g.n : 1) * g.inner));
  line_forward_math<double>(f, xv.data(), out.data(), g);
  return make(out, keep ? Shape{g.outer, g.n, g.inner} : Shape{g.outer, g.inner},
              stats_dtype(x.dtype()));
}

Tensor line_backward(const LineFunction& f, const Tensor& x, const Tensor& result,
                     const Tensor& grad, ReduceGeometry g, DType dtype) {
  const std::vector<double> xv = values(x), gv = values(grad);
  const std::vector<double> rv = result.defined() ? values(result) : std::vector<double>();
  std::vector<double> out(xv.size());
  line_backward_math<double>(f, xv.data(), rv.data(), gv.data(), out.data(), g);
  return make(out, {g.outer, g.n, g.inner}, dtype);
}

Tensor pair_forward(const PairFunction& f, const Tensor& x, const Tensor& t,
                    const Tensor& pos_weight) {
  const std::vector<double> xv = values(x), tv = values(t);
  const std::vector<double> pv = pos_weight.defined() ? values(pos_weight) : std::vector<double>();
  std::vector<double> out(xv.size());
  for (size_t i = 0; i < xv.size(); ++i)
    out[i] = pair_value<double>(f, xv[i], tv[i], pv.empty() ? 1.0 : pv[i], !pv.empty());
  return make(out, x.shape(), stats_dtype(promote(x.dtype(), t.dtype())));
}

std::array<Tensor, 2> pair_backward(const PairFunction& f, const Tensor& x, const Tensor& t,
                                    const Tensor& pos_weight, const Tensor& g, bool want_x,
                                    bool want_t) {
  const std::vector<double> xv = values(x), tv = values(t), gv = values(g);
  const std::vector<double> pv = pos_weight.defined() ? values(pos_weight) : std::vector<double>();
  std::vector<double> dx(xv.size()), dt(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const auto [sx, st] =
        pair_slopes<double>(f, xv[i], tv[i], pv.empty() ? 1.0 : pv[i], !pv.empty());
    dx[i] = gv[i] * sx;
    dt[i] = gv[i] * st;
  }
  const DType acc = stats_dtype(promote(promote(x.dtype(), t.dtype()), g.dtype()));
  return {want_x ? make(dx, x.shape(), acc) : Tensor(),
          want_t ? make(dt, x.shape(), acc) : Tensor()};
}

}  // namespace mixprec::backend::reference
