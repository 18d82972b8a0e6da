// Reference gather / scatter family, topk and concat: element loops over row-major positions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "reference_kernels.h"

namespace mixprec::backend::reference {
namespace {

// The row-major offset, in a tensor of `shape`, of element `flat` of an index of
// `index_shape` (no larger than shape outside dim), its coordinate along dim replaced by
// `at` when at >= 0.
int64_t place(const Shape& index_shape, int64_t flat, const Shape& shape, int dim, int64_t at) {
  int64_t off = 0, stride = 1;
  for (int d = static_cast<int>(index_shape.size()) - 1; d >= 0; --d) {
    const auto u = static_cast<size_t>(d);
    const int64_t c = d == dim && at >= 0 ? at : flat % index_shape[u];
    flat /= index_shape[u];
    off += c * stride;
    stride *= shape[u];
  }
  return off;
}

// Whether a ranks above b: NaN above everything (NaNs tie), -0 ties +0.
bool above(double a, double b) {
  return (std::isnan(a) && !std::isnan(b)) || a > b;
}

}  // namespace

// Copies bytes (not values through f64) so that any dtype, i64 included, moves exactly.
Tensor gather(const Tensor& x, int dim, const Tensor& index, const Shape& out_shape,
              const char* op) {
  const std::vector<int64_t> ix = indices(index);
  check_range(ix, x.size(dim), op);
  const Tensor xc = x.detach().contiguous();
  Tensor out = Tensor::zeros(out_shape, x.dtype());
  const size_t esz = x.element_size();
  const char* src = static_cast<const char*>(xc.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < ix.size(); ++i) {
    const auto flat = static_cast<int64_t>(i);
    const int64_t from = place(index.shape(), flat, x.shape(), dim, ix[i]);
    const int64_t to = place(index.shape(), flat, out_shape, dim, -1);
    std::memcpy(dst + static_cast<size_t>(to) * esz, src + static_cast<size_t>(from) * esz, esz);
  }
  return out;
}

Tensor scatter_add(const Tensor& x, int dim, const Tensor& index, const Tensor& src,
                   const char* op) {
  const std::vector<int64_t> ix = indices(index);
  check_range(ix, x.size(dim), op);
  std::vector<double> out = values(x);
  const std::vector<double> s = values(src);
  for (size_t i = 0; i < ix.size(); ++i) {  // row-major: each target gets its sources in order
    const auto flat = static_cast<int64_t>(i);
    out[static_cast<size_t>(place(index.shape(), flat, x.shape(), dim, ix[i]))] +=
        s[static_cast<size_t>(place(index.shape(), flat, src.shape(), dim, -1))];
  }
  return make(out, x.shape(), x.dtype());
}

Tensor index_add(const Tensor& x, ReduceGeometry g, const Tensor& index, const Tensor& source,
                 double alpha, const char* op) {
  const std::vector<int64_t> ix = indices(index);
  check_range(ix, g.n, op);
  const auto m = static_cast<int64_t>(ix.size());
  std::vector<double> out = values(x);
  const std::vector<double> s = values(source);  // [outer, m, inner]
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t c = 0; c < g.inner; ++c)
        out[static_cast<size_t>((o * g.n + ix[static_cast<size_t>(i)]) * g.inner + c)] +=
            alpha * s[static_cast<size_t>((o * m + i) * g.inner + c)];
  return make(out, x.shape(), x.dtype());
}

Tensor index_select_scaled(const Tensor& grad, ReduceGeometry g, const Tensor& index, double alpha,
                           DType dtype, const char* op) {
  const std::vector<int64_t> ix = indices(index);
  check_range(ix, g.n, op);
  const auto m = static_cast<int64_t>(ix.size());
  const std::vector<double> gv = values(grad);  // [outer, n, inner]
  std::vector<double> out(static_cast<size_t>(g.outer * m * g.inner));
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t c = 0; c < g.inner; ++c)
        out[static_cast<size_t>((o * m + i) * g.inner + c)] =
            alpha * gv[static_cast<size_t>((o * g.n + ix[static_cast<size_t>(i)]) * g.inner + c)];
  return make(out, {g.outer, m, g.inner}, dtype);
}

// Each line x[o, :, c] ranked by a stable sort: ties keep the lower index first. For the
// smallest, NaN (above everything) comes last.
std::pair<Tensor, Tensor> topk(const Tensor& x, ReduceGeometry g, int64_t k, bool largest) {
  const std::vector<double> xv = values(x);  // [outer, n, inner]
  std::vector<double> vals(static_cast<size_t>(g.outer * k * g.inner)), idx(vals.size());
  std::vector<int64_t> order(static_cast<size_t>(g.n));
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t c = 0; c < g.inner; ++c) {
      auto at = [&](int64_t t) { return xv[static_cast<size_t>((o * g.n + t) * g.inner + c)]; };
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return largest ? above(at(a), at(b)) : above(at(b), at(a));
      });
      for (int64_t j = 0; j < k; ++j) {
        const auto e = static_cast<size_t>((o * k + j) * g.inner + c);
        idx[e] = static_cast<double>(order[static_cast<size_t>(j)]);
        vals[e] = at(order[static_cast<size_t>(j)]);
      }
    }
  const Shape shape{g.outer, k, g.inner};
  return {make(vals, shape, x.dtype()), make(idx, shape, DType::i64)};
}

Tensor topk_backward(const Tensor& grad, const Tensor& index, ReduceGeometry g, int64_t k,
                     DType dtype) {
  const std::vector<int64_t> ix = indices(index);  // [outer, k, inner]
  check_range(ix, g.n, "topk backward");
  const std::vector<double> gv = values(grad);  // [outer, k, inner]
  std::vector<double> out(static_cast<size_t>(g.outer * g.n * g.inner), 0.0);
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t c = 0; c < g.inner; ++c) {
        const auto e = static_cast<size_t>((o * k + j) * g.inner + c);
        out[static_cast<size_t>((o * g.n + ix[e]) * g.inner + c)] = gv[e];
      }
  return make(out, {g.outer, g.n, g.inner}, dtype);
}

// Byte copies, as gather: parts of any dtype join exactly.
Tensor concat(const std::vector<Tensor>& parts, int dim, const Shape& out_shape) {
  Tensor out = Tensor::empty(out_shape, parts.at(0).dtype());
  const ReduceGeometry g = reduce_geometry(out_shape, dim);
  const auto esz = static_cast<int64_t>(out.element_size());
  char* dst = static_cast<char*>(out.raw_data());
  int64_t at = 0;  // where the part starts along dim
  for (const Tensor& part : parts) {
    const int64_t n = part.size(dim), block = n * g.inner * esz;  // bytes per outer row
    const Tensor pc = part.detach().contiguous();
    const char* src = static_cast<const char*>(pc.raw_data());
    for (int64_t o = 0; o < g.outer && block > 0; ++o)
      std::memcpy(dst + (o * g.n + at) * g.inner * esz, src + o * block,
                  static_cast<size_t>(block));
    at += n;
  }
  return out;
}

}  // namespace mixprec::backend::reference
