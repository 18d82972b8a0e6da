// Reference pointwise math: backend/pointwise_math.h's formulas in f64.
#include "../pointwise_math.h"
#include "reference_kernels.h"

namespace mixprec::backend::reference {

Tensor pointwise_forward(const Pointwise& f, const Tensor& x) {
  std::vector<double> v = values(x);
  for (double& e : v) e = pointwise_value<double>(f, e);
  return make(v, x.shape(), x.dtype());
}

Tensor pointwise_backward(const Pointwise& f, const Tensor& x, const Tensor& g) {
  MIXPREC_CHECK(g.shape() == x.shape(), pointwise_name(f.op),
                "gradient has shape " + shape_to_string(g.shape()) + ", expected " +
                    shape_to_string(x.shape()));
  const std::vector<double> xv = values(x), gv = values(g);
  std::vector<double> r(xv.size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = gv[i] * pointwise_slope<double>(f, xv[i]);
  return make(r, x.shape(), x.dtype());
}

}  // namespace mixprec::backend::reference
