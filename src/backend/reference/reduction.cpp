// Reference reductions over [outer, n, inner] (sum, mean, L2 norm, max) and their backward,
// and the sum of a broadcast gradient back to its source shape: f64 sums in index order.
#include <cmath>

#include "reference_kernels.h"

namespace mixprec::backend::reference {
namespace {

size_t at(ReduceGeometry g, int64_t o, int64_t k, int64_t c) {
  return static_cast<size_t>((o * g.n + k) * g.inner + c);
}

}  // namespace

Tensor reduce_dim(const Tensor& x, ReduceGeometry g, ReduceOp op) {
  const std::vector<double> xv = values(x);
  std::vector<double> out(static_cast<size_t>(g.outer * g.inner));
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t c = 0; c < g.inner; ++c) {
      double s = 0;
      for (int64_t k = 0; k < g.n; ++k) {
        const double v = xv[at(g, o, k, c)];
        s += op == ReduceOp::norm ? v * v : v;
      }
      if (op == ReduceOp::mean) s /= static_cast<double>(g.n);  // n == 0 gives NaN
      if (op == ReduceOp::norm) s = std::sqrt(s);
      out[static_cast<size_t>(o * g.inner + c)] = s;
    }
  return make(out, {g.outer, g.inner}, stats_dtype(x.dtype()));
}

Tensor reduce_expand_backward(const Tensor& grad, ReduceGeometry g, bool mean, DType dtype) {
  const std::vector<double> gv = values(grad);  // [outer, inner]
  std::vector<double> out(static_cast<size_t>(g.outer * g.n * g.inner));
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t k = 0; k < g.n; ++k)
      for (int64_t c = 0; c < g.inner; ++c) {
        const double v = gv[static_cast<size_t>(o * g.inner + c)];
        out[at(g, o, k, c)] = mean ? v / static_cast<double>(g.n) : v;
      }
  return make(out, {g.outer, g.n, g.inner}, dtype);
}

Tensor l2_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& norm, ReduceGeometry g) {
  const std::vector<double> gv = values(grad), xv = values(x), nv = values(norm);
  std::vector<double> out(xv.size());
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t c = 0; c < g.inner; ++c) {
      const auto r = static_cast<size_t>(o * g.inner + c);
      const double s = nv[r] == 0 ? 0.0 : gv[r] / nv[r];  // PyTorch's subgradient at 0
      for (int64_t k = 0; k < g.n; ++k) out[at(g, o, k, c)] = xv[at(g, o, k, c)] * s;
    }
  return make(out, {g.outer, g.n, g.inner}, x.dtype());
}

// The first maximum wins ties; NaN is above everything (the first NaN wins).
std::pair<Tensor, Tensor> max_dim(const Tensor& x, ReduceGeometry g) {
  MIXPREC_CHECK(g.n >= 1, "max", "cannot take the max over an empty dim");
  const std::vector<double> xv = values(x);
  std::vector<double> best(static_cast<size_t>(g.outer * g.inner)), idx(best.size());
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t c = 0; c < g.inner; ++c) {
      int64_t bk = 0;
      for (int64_t k = 1; k < g.n; ++k) {
        const double v = xv[at(g, o, k, c)], b = xv[at(g, o, bk, c)];
        if (v > b || (std::isnan(v) && !std::isnan(b))) bk = k;
      }
      const auto r = static_cast<size_t>(o * g.inner + c);
      best[r] = xv[at(g, o, bk, c)];
      idx[r] = static_cast<double>(bk);
    }
  const Shape shape{g.outer, g.inner};
  return {make(best, shape, x.dtype()), make(idx, shape, DType::i64)};
}

Tensor max_backward(const Tensor& grad, const Tensor& index, ReduceGeometry g, DType dtype) {
  const std::vector<int64_t> ix = indices(index);  // [outer, inner]
  check_range(ix, g.n, "max backward");
  const std::vector<double> gv = values(grad);
  std::vector<double> out(static_cast<size_t>(g.outer * g.n * g.inner), 0.0);
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t c = 0; c < g.inner; ++c) {
      const auto r = static_cast<size_t>(o * g.inner + c);
      out[at(g, o, ix[r], c)] = gv[r];
    }
  return make(out, {g.outer, g.n, g.inner}, dtype);
}

// Element i of grad adds into the element of `shape` it was broadcast from (the dims of
// `shape` aligned to grad's last ones, size-1 dims repeated).
Tensor reduce_to_shape(const Tensor& grad, const Shape& shape, std::optional<DType> out_dtype) {
  const std::vector<int64_t> dst = broadcast_sources(shape, grad.shape(), "reduce_to_shape");
  const std::vector<double> gv = values(grad);
  std::vector<double> out(static_cast<size_t>(shape_numel(shape)), 0.0);
  for (size_t i = 0; i < gv.size(); ++i) out[static_cast<size_t>(dst[i])] += gv[i];
  return make(out, shape, out_dtype.value_or(grad.dtype()));
}

}  // namespace mixprec::backend::reference
