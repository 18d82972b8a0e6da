// gather and scatter_add as the backend table runs them, on the gather/scatter kernels.
#include "mixprec/cpu/indexing.h"

namespace mixprec::cpu {
namespace {

// A scatter of whole rows into a tensor without leading dims (token rows added by a broadcast
// row index) is an index_add. Returns its 1-d index then, else an undefined tensor.
Tensor row_scatter_index(const IndexView& index, const Shape& x_shape, const Shape& src_shape,
                         int dim) {
  if (!index.rows || reduce_geometry(x_shape, dim).outer != 1 ||
      reduce_geometry(index.shape, dim).outer != 1)
    return {};
  const auto tail = [&](const Shape& s) { return Shape(s.begin() + dim + 1, s.end()); };
  if (tail(index.shape) != tail(x_shape) || tail(src_shape) != tail(x_shape)) return {};
  return index.data.view({index.shape[static_cast<size_t>(dim)]});
}

}  // namespace

Tensor gather(const Tensor& x, int dim, const Tensor& index, const Shape& out_shape,
              const char* op) {
  const IndexView ic = index_view(index, dim);
  check_index_range(ic.data, x.size(dim), op);
  const Shape& is = index.shape();
  Tensor out =
      out_shape == is ? Tensor::empty(out_shape, x.dtype()) : Tensor::zeros(out_shape, x.dtype());
  gather_into(x.detach().contiguous(), index_placement(is, x.shape(), dim), ic, dim, out,
              index_placement(is, out_shape, dim));
  return out;
}

Tensor scatter_add(const Tensor& x, int dim, const Tensor& index, const Tensor& src,
                   const char* op) {
  const IndexView ic = index_view(index, dim);
  check_index_range(ic.data, x.size(dim), op);
  const Tensor xc = x.detach().contiguous();
  const Shape& is = index.shape();
  if (const Tensor rows = row_scatter_index(ic, x.shape(), src.shape(), dim); rows.defined()) {
    const Tensor src_rows = src.detach().slice(dim, 0, is[static_cast<size_t>(dim)]).contiguous();
    return index_add(xc, reduce_geometry(x.shape(), dim), rows, src_rows, 1.0);
  }
  const DType acc_t = reduce_acc_dtype(x.dtype());
  const Tensor acc = xc.dtype() == acc_t ? xc.clone() : xc.to(acc_t);  // a fresh buffer
  scatter_add_into(acc, index_placement(is, x.shape(), dim), ic, dim,
                   src.detach().contiguous().to(acc_t).contiguous(),
                   index_placement(is, src.shape(), dim));
  return acc.to(x.dtype());
}

}  // namespace mixprec::cpu
