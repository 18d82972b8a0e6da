// gather / scatter_add kernels over index placements, and index range checks.
#include "mixprec/cpu/indexing.h"

#include <algorithm>
#include <cstring>

#include "mixprec/core/parallel.h"
#include "mixprec/tensor/dispatch.h"
#include "task_size.h"

namespace mixprec::cpu {
namespace {

constexpr int64_t kRowMin = 16;  // runs at least this long with one index are row copies/adds

// Offsets, for every multi-index over shape[d0, d1), of that position under `strides`.
std::vector<int64_t> offsets(const Shape& shape, const Shape& strides, size_t d0, size_t d1) {
  int64_t count = 1;
  for (size_t d = d0; d < d1; ++d) count *= shape[d];
  std::vector<int64_t> out(static_cast<size_t>(count));
  Shape idx(shape.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < count; ++i) {
    out[static_cast<size_t>(i)] = off;
    for (size_t d = d1; d-- > d0;) {  // row-major increment
      ++idx[d];
      off += strides[d];
      if (idx[d] < shape[d]) break;
      off -= strides[d] * idx[d];
      idx[d] = 0;
    }
  }
  return out;
}

template <class I>
bool all_equal(const I* ix, int64_t n) {
  for (int64_t i = 1; i < n; ++i)
    if (ix[i] != ix[0]) return false;
  return true;
}

// The storage type that copies one element of `size` bytes.
template <class Fn>
void dispatch_bytes(std::size_t size, Fn&& fn) {
  switch (size) {
    case 1:
      return fn.template operator()<uint8_t>();
    case 2:
      return fn.template operator()<uint16_t>();
    case 4:
      return fn.template operator()<uint32_t>();
    case 8:
      return fn.template operator()<uint64_t>();
    default:
      throw Error("gather", "unsupported element size " + std::to_string(size));
  }
}

template <class E, class I>
void gather_impl(const E* src, const IndexPlacement& sp, const I* index, bool row_index,
                 int64_t outer, int64_t m, int64_t inner, E* dst, const IndexPlacement& dp) {
  const bool rows = sp.inner_contiguous && dp.inner_contiguous;
  const auto row_bytes = static_cast<size_t>(inner) * sizeof(E);
  parallel_for(outer * m, std::max<int64_t>(1, kTaskElems / std::max<int64_t>(1, inner)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const int64_t o = r / m, j = r % m;
                   const E* s = src + sp.outer_off[static_cast<size_t>(o)];
                   E* d = dst + dp.outer_off[static_cast<size_t>(o)] + j * dp.dim_stride;
                   if (row_index) {  // one value for the whole row
                     const E* srow = s + static_cast<int64_t>(index[r]) * sp.dim_stride;
                     if (rows) {
                       std::memcpy(d, srow, row_bytes);
                     } else {
                       for (int64_t p = 0; p < inner; ++p)
                         d[dp.inner_off[static_cast<size_t>(p)]] =
                             srow[sp.inner_off[static_cast<size_t>(p)]];
                     }
                     continue;
                   }
                   const I* ix = index + r * inner;  // [inner]
                   if (rows && inner >= kRowMin && all_equal(ix, inner)) {
                     std::memcpy(d, s + static_cast<int64_t>(ix[0]) * sp.dim_stride, row_bytes);
                   } else if (rows) {
                     for (int64_t p = 0; p < inner; ++p) d[p] = s[ix[p] * sp.dim_stride + p];
                   } else {
                     for (int64_t p = 0; p < inner; ++p)
                       d[dp.inner_off[static_cast<size_t>(p)]] =
                           s[ix[p] * sp.dim_stride + sp.inner_off[static_cast<size_t>(p)]];
                   }
                 }
               });
}

// Tasks own (outer slab, block of inner positions): disjoint outputs, each element summed in
// index order j. The partition never changes a result, so it may follow the thread count:
// whole slabs when there are enough, else each slab's columns split across the threads (wide
// blocks: every task rescans the index rows).
template <class A, class I>
void scatter_impl(A* acc, const IndexPlacement& ap, const I* index, bool row_index, int64_t outer,
                  int64_t m, int64_t inner, const A* src, const IndexPlacement& sp) {
  const bool rows = ap.inner_contiguous && sp.inner_contiguous;
  const int64_t threads = num_threads();
  const int64_t per_slab = outer >= threads ? 1 : (threads + outer - 1) / outer;
  const int64_t cols = std::max<int64_t>(kRowMin, (inner + per_slab - 1) / per_slab);
  const int64_t cb = (inner + cols - 1) / cols;  // column blocks per slab
  const int64_t task = std::max<int64_t>(1, m * std::min(inner, cols));
  parallel_for(outer * cb, std::max<int64_t>(1, kTaskElems / task), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / cb, p0 = t % cb * cols;
      const int64_t p1 = std::min(inner, p0 + cols);
      A* a = acc + ap.outer_off[static_cast<size_t>(o)];
      const A* s = src + sp.outer_off[static_cast<size_t>(o)];
      for (int64_t j = 0; j < m; ++j) {
        const A* sj = s + j * sp.dim_stride;
        const I* ix = row_index ? index + o * m + j : index + (o * m + j) * inner;
        if (row_index || (rows && p1 - p0 >= kRowMin && all_equal(ix + p0, p1 - p0))) {
          A* arow = a + static_cast<int64_t>(ix[row_index ? 0 : p0]) * ap.dim_stride;
          if (rows) {
            for (int64_t p = p0; p < p1; ++p) arow[p] += sj[p];
          } else {
            for (int64_t p = p0; p < p1; ++p)
              arow[ap.inner_off[static_cast<size_t>(p)]] +=
                  sj[sp.inner_off[static_cast<size_t>(p)]];
          }
        } else if (rows) {
          for (int64_t p = p0; p < p1; ++p) a[ix[p] * ap.dim_stride + p] += sj[p];
        } else {
          for (int64_t p = p0; p < p1; ++p)
            a[ix[p] * ap.dim_stride + ap.inner_off[static_cast<size_t>(p)]] +=
                sj[sp.inner_off[static_cast<size_t>(p)]];
        }
      }
    }
  });
}

// [outer, m, inner] split of an index shape at dim.
ReduceGeometry split(const Shape& index_shape, int dim) {
  return reduce_geometry(index_shape, dim);
}

}  // namespace

void check_index_range(const Tensor& index, int64_t bound, const char* op) {
  dispatch_index(index, op, [&]<class I>() {
    const I* ix = index.data<I>();
    const int64_t n = index.numel();
    for (int64_t i = 0; i < n; ++i) {
      if (ix[i] < 0 || ix[i] >= bound) {
        throw Error(op, "index value " + std::to_string(ix[i]) + " (at flat position " +
                            std::to_string(i) + ") is out of range [0, " + std::to_string(bound) +
                            ")");
      }
    }
  });
}

IndexPlacement index_placement(const Shape& index_shape, const Shape& shape, int dim) {
  const Shape strides = contiguous_strides(shape);
  const auto d = static_cast<size_t>(dim);
  IndexPlacement pl;
  pl.dim_stride = strides[d];
  pl.outer_off = offsets(index_shape, strides, 0, d);
  pl.inner_off = offsets(index_shape, strides, d + 1, shape.size());
  pl.inner_contiguous = std::equal(index_shape.begin() + dim + 1, index_shape.end(),
                                   shape.begin() + dim + 1, shape.end());
  return pl;
}

IndexView index_view(const Tensor& index, int dim) {
  IndexView v{Tensor(), index.shape(), false};
  const int nd = index.ndim();
  int64_t inner = 1;
  bool broadcast = nd > dim + 1;
  for (int d = dim + 1; d < nd; ++d) {
    inner *= index.size(d);
    broadcast = broadcast && index.strides()[static_cast<size_t>(d)] == 0;
  }
  if (broadcast && inner > 1) {
    Tensor rows = index.detach();
    for (int d = nd - 1; d > dim; --d) rows = rows.select(d, 0);
    v.data = rows.contiguous();  // [outer..., m]
    v.rows = true;
  } else {
    v.data = index.detach().contiguous();
  }
  return v;
}

void gather_into(const Tensor& src, const IndexPlacement& sp, const IndexView& index, int dim,
                 const Tensor& dst, const IndexPlacement& dp) {
  const ReduceGeometry g = split(index.shape, dim);
  dispatch_index(index.data, "gather", [&]<class I>() {
    dispatch_bytes(src.element_size(), [&]<class E>() {
      gather_impl<E, I>(static_cast<const E*>(src.raw_data()), sp, index.data.data<I>(), index.rows,
                        g.outer, g.n, g.inner, static_cast<E*>(dst.raw_data()), dp);
    });
  });
}

void scatter_add_into(const Tensor& acc, const IndexPlacement& ap, const IndexView& index, int dim,
                      const Tensor& src, const IndexPlacement& sp) {
  MIXPREC_CHECK(
      acc.dtype() == src.dtype() && (acc.dtype() == DType::f32 || acc.dtype() == DType::f64),
      "scatter_add", "accumulator and source must both be f32 or both f64");
  const ReduceGeometry g = split(index.shape, dim);
  dispatch_index(index.data, "scatter_add", [&]<class I>() {
    const I* ix = index.data.data<I>();
    if (acc.dtype() == DType::f64)
      scatter_impl<double, I>(acc.data<double>(), ap, ix, index.rows, g.outer, g.n, g.inner,
                              src.data<double>(), sp);
    else
      scatter_impl<float, I>(acc.data<float>(), ap, ix, index.rows, g.outer, g.n, g.inner,
                             src.data<float>(), sp);
  });
}

}  // namespace mixprec::cpu
