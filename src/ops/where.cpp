// where as an exact selection: x and y (cast to the result dtype, broadcast) side by side as
// [2, N], and a gather picking row 0 or 1 per element. No arithmetic touches a value, so inf
// and NaN in the branch not taken never leak in; the gradient is gather's, which puts g into
// the taken branch only.
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/indexing.h"

namespace mixprec {

Tensor where(const Tensor& cond, const Tensor& x_in, const Tensor& y_in) {
  const auto [x, y] = amp::autocast_args("where", x_in, y_in);
  MIXPREC_CHECK(cond.defined() && (cond.dtype() == DType::boolean || cond.dtype() == DType::u8),
                "where", "the condition must be a boolean (or u8) tensor");
  MIXPREC_CHECK(x.defined() && y.defined(), "where", "undefined input");
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), x.shape()), y.shape());
  const DType dt = promote(x.dtype(), y.dtype());
  const int64_t n = shape_numel(shape);
  const std::vector<double> c = broadcast_to(cond.detach(), shape).to_doubles();
  std::vector<double> pick(c.size());
  for (size_t i = 0; i < c.size(); ++i) pick[i] = c[i] != 0 ? 0.0 : 1.0;
  const amp::AutocastGuard inner(DType::bf16, /*enabled=*/false);  // already one dtype
  const Tensor both = concat({broadcast_to(x.to(dt), shape).reshape({1, n}),
                              broadcast_to(y.to(dt), shape).reshape({1, n})},
                             0);
  return gather(both, 0, Tensor::from_doubles(pick, {1, n}, DType::i64)).view(shape);
}

Tensor where(const Tensor& cond, const Tensor& x, double y) {
  MIXPREC_CHECK(x.defined(), "where", "undefined input");
  // A number keeps a floating x's dtype; beside an integer x it makes the result floating
  // (f32, PyTorch's default dtype), as torch.result_type does.
  const DType dt = is_floating(x.dtype()) ? x.dtype() : DType::f32;
  return where(cond, x.to(dt), Tensor::full({}, y, dt));
}

}  // namespace mixprec
