// sum / mean / L2 norm over one dim, and their backward kernels.
//
// Summation order (fixed by the shape alone, never by the thread count):
//  - inner == 1 (rows): each row is cut into kChunk-element chunks; a chunk is summed in
//    kLanes interleaved lanes folded pairwise, and the chunk partials are added in order.
//  - inner > 1 (columns): the n rows are cut into kRows-row blocks summed top to bottom per
//    column; the block partials are added in order.
#include "mixprec/cpu/reduction.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/row_io.h"
#include "mixprec/tensor/dispatch.h"
#include "reduction_blocking.h"
#include "task_size.h"

namespace mixprec::cpu {
namespace {

using reduction_blocking::kBlock;
using reduction_blocking::kChunk;
using reduction_blocking::kCols;
using reduction_blocking::kRows;
constexpr int64_t kLanes = 16;  // interleaved accumulators inside a chunk

template <class A, bool Squares>
inline A term(A v) {
  if constexpr (Squares) {
    return v * v;
  } else {
    return v;
  }
}

// Sum (of squares) of x[0, len) in kLanes lanes folded pairwise.
template <class T, bool Squares>
acc_t<T> chunk_sum(const T* x, int64_t len) {
  using A = acc_t<T>;
  A lanes[kLanes] = {};
  A buf[kBlock];  // x[b, b + kBlock) widened
  for (int64_t b = 0; b < len; b += kBlock) {
    const int64_t m = std::min(kBlock, len - b);
    const A* p = as_acc(x + b, buf, m);
    int64_t j = 0;
    for (; j + kLanes <= m; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] += term<A, Squares>(p[j + l]);
    for (int64_t l = 0; j < m; ++j, ++l) lanes[l] += term<A, Squares>(p[j]);
  }
  for (int64_t w = kLanes / 2; w >= 1; w /= 2)
    for (int64_t l = 0; l < w; ++l) lanes[l] += lanes[l + w];
  return lanes[0];
}

// x [rows, n] -> out [rows]
template <class T, bool Squares>
void reduce_rows(const T* x, int64_t rows, int64_t n, acc_t<T>* out) {
  using A = acc_t<T>;
  const int64_t per_row = std::max<int64_t>(1, (n + kChunk - 1) / kChunk);
  std::vector<A> partial(static_cast<size_t>(rows * per_row));  // [rows, per_row]
  const int64_t grain =
      std::max<int64_t>(1, kTaskElems / std::max<int64_t>(1, std::min(n, kChunk)));
  parallel_for(rows * per_row, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = t / per_row, begin = (t % per_row) * kChunk;
      partial[static_cast<size_t>(t)] =
          chunk_sum<T, Squares>(x + r * n + begin, std::min(kChunk, n - begin));
    }
  });
  for (int64_t r = 0; r < rows; ++r) {
    A s = partial[static_cast<size_t>(r * per_row)];
    for (int64_t c = 1; c < per_row; ++c) s += partial[static_cast<size_t>(r * per_row + c)];
    out[r] = s;
  }
}

// x [outer, n, inner] -> out [outer, inner]
template <class T, bool Squares>
void reduce_cols(const T* x, int64_t outer, int64_t n, int64_t inner, acc_t<T>* out) {
  using A = acc_t<T>;
  const int64_t kb = std::max<int64_t>(1, (n + kRows - 1) / kRows);
  const int64_t cb = (inner + kCols - 1) / kCols;
  std::vector<A> partial(kb > 1 ? static_cast<size_t>(outer * kb * inner) : 0);  // [outer,kb,inner]
  A* dst = kb > 1 ? partial.data() : out;
  const int64_t task = std::min(n, kRows) * std::min(inner, kCols);
  parallel_for(outer * kb * cb, std::max<int64_t>(1, kTaskElems / std::max<int64_t>(1, task)),
               [&](int64_t t0, int64_t t1) {
                 std::vector<A> buf(static_cast<size_t>(std::min(inner, kCols)));  // one row part
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t o = t / (kb * cb), b = t / cb % kb, c0 = t % cb * kCols;
                   const int64_t w = std::min(kCols, inner - c0);
                   const int64_t k1 = std::min(n, (b + 1) * kRows);
                   A* acc = dst + (o * kb + b) * inner + c0;  // [w]
                   std::fill(acc, acc + w, A(0));
                   for (int64_t k = b * kRows; k < k1; ++k) {
                     const T* row = x + (o * n + k) * inner + c0;
                     const A* p = as_acc(row, buf.data(), w);
                     for (int64_t i = 0; i < w; ++i) acc[i] += term<A, Squares>(p[i]);
                   }
                 }
               });
  if (kb == 1) return;
  for (int64_t o = 0; o < outer; ++o) {
    A* dst_o = out + o * inner;  // [inner]
    const A* src = partial.data() + o * kb * inner;
    std::copy(src, src + inner, dst_o);
    for (int64_t b = 1; b < kb; ++b)
      for (int64_t i = 0; i < inner; ++i) dst_o[i] += src[b * inner + i];
  }
}

// dst[0, n) = value; narrow types are filled through their bits so the loop vectorizes.
template <class T>
void fill(T* dst, int64_t n, T value) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
    auto* bits = reinterpret_cast<uint16_t*>(dst);  // bf16/f16 are one uint16_t
    std::fill(bits, bits + n, value.bits);
  } else {
    std::fill(dst, dst + n, value);
  }
}

// Calls fn(o, e, len) for the runs of flat indices [e0, e1) of an [outer, n] space that
// share one outer index o.
template <class Fn>
void for_runs(int64_t e0, int64_t e1, int64_t n, Fn&& fn) {
  while (e0 < e1) {
    const int64_t o = e0 / n, end = std::min(e1, (o + 1) * n);
    fn(o, e0, end - e0);
    e0 = end;
  }
}

}  // namespace

Tensor reduce_dim(const Tensor& x, ReduceGeometry g, ReduceOp op) {
  Tensor out = Tensor::empty({g.outer, g.inner}, reduce_acc_dtype(x.dtype()));
  dispatch_compute(x.dtype(), "reduce", [&]<class T>() {
    using A = acc_t<T>;
    const T* px = x.data<T>();
    A* po = out.data<A>();  // [outer, inner]
    const bool squares = op == ReduceOp::norm;
    if (g.inner == 1) {
      squares ? reduce_rows<T, true>(px, g.outer, g.n, po)
              : reduce_rows<T, false>(px, g.outer, g.n, po);
    } else {
      squares ? reduce_cols<T, true>(px, g.outer, g.n, g.inner, po)
              : reduce_cols<T, false>(px, g.outer, g.n, g.inner, po);
    }
    const int64_t m = g.outer * g.inner;
    if (op == ReduceOp::mean)
      for (int64_t i = 0; i < m; ++i) po[i] /= static_cast<A>(g.n);  // n == 0 gives NaN
    if (op == ReduceOp::norm)
      for (int64_t i = 0; i < m; ++i) po[i] = std::sqrt(po[i]);
  });
  return out;
}

Tensor reduce_expand_backward(const Tensor& grad, ReduceGeometry g, bool mean, DType dtype) {
  const Tensor ga = grad.to(reduce_acc_dtype(dtype)).contiguous();  // [outer, inner]
  Tensor out = Tensor::empty({g.outer, g.n, g.inner}, dtype);
  dispatch_compute(dtype, "reduce backward", [&]<class T>() {
    using A = acc_t<T>;
    const int64_t m = g.outer * g.inner;
    std::vector<A> scaled(static_cast<size_t>(m));  // [outer, inner]
    const A* pg = ga.data<A>();
    for (int64_t i = 0; i < m; ++i) scaled[static_cast<size_t>(i)] = mean ? pg[i] / A(g.n) : pg[i];
    std::vector<T> vals(static_cast<size_t>(m));  // [outer, inner], rounded once
    store_row(scaled.data(), vals.data(), m);
    T* po = out.data<T>();  // [outer, n, inner]
    if (g.inner == 1) {
      parallel_for(g.outer * g.n, kTaskElems, [&](int64_t e0, int64_t e1) {
        for_runs(e0, e1, g.n, [&](int64_t o, int64_t e, int64_t len) {
          fill(po + e, len, vals[static_cast<size_t>(o)]);
        });
      });
    } else {
      const auto row_bytes = static_cast<size_t>(g.inner) * sizeof(T);
      parallel_for(g.outer * g.n, rows_per_chunk(g.inner), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          std::memcpy(po + r * g.inner, vals.data() + r / g.n * g.inner, row_bytes);
      });
    }
  });
  return out;
}

Tensor norm_backward(const Tensor& grad, const Tensor& x, const Tensor& norm, ReduceGeometry g) {
  const Tensor ga = grad.to(reduce_acc_dtype(x.dtype())).contiguous();  // [outer, inner]
  Tensor out = Tensor::empty({g.outer, g.n, g.inner}, x.dtype());
  dispatch_compute(x.dtype(), "norm backward", [&]<class T>() {
    using A = acc_t<T>;
    const int64_t m = g.outer * g.inner;
    const A* pg = ga.data<A>();
    const A* pn = norm.data<A>();
    std::vector<A> scale(static_cast<size_t>(m));  // [outer, inner]: grad / norm, 0 at norm 0
    for (int64_t i = 0; i < m; ++i) scale[static_cast<size_t>(i)] = pn[i] == 0 ? 0 : pg[i] / pn[i];
    const T* px = x.data<T>();  // [outer, n, inner]
    T* po = out.data<T>();
    if (g.inner == 1) {
      parallel_for(g.outer * g.n, kChunk, [&](int64_t e0, int64_t e1) {
        std::vector<A> buf(static_cast<size_t>(e1 - e0));  // x run widened
        for_runs(e0, e1, g.n, [&](int64_t o, int64_t e, int64_t len) {
          load_row(px + e, buf.data(), len);
          const A s = scale[static_cast<size_t>(o)];
          for (int64_t j = 0; j < len; ++j) buf[static_cast<size_t>(j)] *= s;
          store_row(buf.data(), po + e, len);
        });
      });
    } else {
      parallel_for(g.outer * g.n, rows_per_chunk(g.inner), [&](int64_t r0, int64_t r1) {
        std::vector<A> buf(static_cast<size_t>(g.inner));  // one x row widened
        for (int64_t r = r0; r < r1; ++r) {
          load_row(px + r * g.inner, buf.data(), g.inner);
          const A* s = scale.data() + r / g.n * g.inner;
          for (int64_t i = 0; i < g.inner; ++i) buf[static_cast<size_t>(i)] *= s[i];
          store_row(buf.data(), po + r * g.inner, g.inner);
        }
      });
    }
  });
  return out;
}

}  // namespace mixprec::cpu
