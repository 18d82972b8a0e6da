// max over one dim with the index of the first maximal element, and its backward.
// Chunking follows reduction.cpp (fixed by the shape); partials are combined in order and a
// later chunk wins only when strictly greater, so the first maximum wins whatever the thread
// count. NaN counts as the maximum, like PyTorch.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/reduction.h"
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

// v replaces the current best: strictly greater, or the first NaN.
template <class A>
inline bool beats(A v, A best) {
  return v > best || (v != v && best == best);
}

template <class A>
struct Best {
  A value;
  int64_t index;
};

// 16-byte vectors (GCC/Clang vector extensions): `v > m ? v : m` over vectors, which compilers
// do not vectorize as a scalar loop without -ffast-math.
typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));
template <class A>
using vec_t = std::conditional_t<std::is_same_v<A, double>, v2d, v4f>;

// Max of p[0, m) (m >= 1) ignoring NaN, and a flag: any_bad (the sum of p - p) is NaN when p
// holds NaN or inf, and the caller rescans then.
template <class A>
void block_max_of(const A* p, int64_t m, A& block_max, A& any_bad) {
  using V = vec_t<A>;
  constexpr int64_t kW = 16 / sizeof(A);  // lanes per vector
  constexpr int64_t kV = 4;               // independent vectors
  V mx[kV], bad[kV];
  for (int64_t u = 0; u < kV; ++u) {
    mx[u] = V{} + p[0];
    bad[u] = V{};
  }
  int64_t j = 0;
  for (; j + kV * kW <= m; j += kV * kW) {
    for (int64_t u = 0; u < kV; ++u) {
      V v;
      std::memcpy(&v, p + j + u * kW, sizeof(V));
      mx[u] = v > mx[u] ? v : mx[u];
      bad[u] += v - v;
    }
  }
  A best = p[0], bad_sum = 0;
  for (int64_t u = 0; u < kV; ++u)
    for (int64_t l = 0; l < kW; ++l) {
      best = mx[u][l] > best ? mx[u][l] : best;
      bad_sum += bad[u][l];
    }
  for (; j < m; ++j) {
    best = p[j] > best ? p[j] : best;
    bad_sum += p[j] - p[j];
  }
  block_max = best;
  any_bad = bad_sum;
}

// The first position of p[0, m) equal to value (which p holds).
template <class A>
int64_t find_first(const A* p, int64_t m, A value) {
  using V = vec_t<A>;
  constexpr int64_t kW = 16 / sizeof(A);
  const V target = V{} + value;
  int64_t j = 0;
  for (; j + kW <= m; j += kW) {
    V v;
    std::memcpy(&v, p + j, sizeof(V));
    const auto eq = v == target;
    bool any = false;
    for (int64_t l = 0; l < kW; ++l) any |= eq[l] != 0;
    if (any) break;
  }
  while (!(p[j] == value)) ++j;
  return j;
}

// Max of x[0, len) (len >= 1); indices reported as base + position. Per block: the block
// maximum, then (only when it beats the best so far) the first position holding it. A block
// with NaN or inf takes the scalar scan.
template <class T>
Best<acc_t<T>> chunk_max(const T* x, int64_t len, int64_t base) {
  using A = acc_t<T>;
  A buf[kBlock];  // x[b, b + kBlock) widened
  Best<A> best{static_cast<A>(x[0]), base};
  for (int64_t b = 0; b < len; b += kBlock) {
    const int64_t m = std::min(kBlock, len - b);
    const A* p = as_acc(x + b, buf, m);
    A block_max, any_bad;
    block_max_of(p, m, block_max, any_bad);
    if (any_bad != any_bad) {
      for (int64_t i = 0; i < m; ++i)
        if (beats(p[i], best.value)) best = {p[i], base + b + i};
    } else if (block_max > best.value) {
      best = {block_max, base + b + find_first(p, m, block_max)};
    }
  }
  return best;
}

// x [rows, n] -> values, indices [rows]
template <class T>
void max_rows(const T* x, int64_t rows, int64_t n, acc_t<T>* values, int64_t* indices) {
  using A = acc_t<T>;
  const int64_t per_row = (n + kChunk - 1) / kChunk;
  std::vector<Best<A>> partial(static_cast<size_t>(rows * per_row));  // [rows, per_row]
  parallel_for(rows * per_row, std::max<int64_t>(1, kTaskElems / std::min(n, kChunk)),
               [&](int64_t t0, int64_t t1) {
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t r = t / per_row, begin = (t % per_row) * kChunk;
                   partial[static_cast<size_t>(t)] =
                       chunk_max(x + r * n + begin, std::min(kChunk, n - begin), begin);
                 }
               });
  for (int64_t r = 0; r < rows; ++r) {
    Best<A> best = partial[static_cast<size_t>(r * per_row)];
    for (int64_t c = 1; c < per_row; ++c) {
      const Best<A>& p = partial[static_cast<size_t>(r * per_row + c)];
      if (beats(p.value, best.value)) best = p;
    }
    values[r] = best.value;
    indices[r] = best.index;
  }
}

// x [outer, n, inner] -> values, indices [outer, inner]
template <class T>
void max_cols(const T* x, int64_t outer, int64_t n, int64_t inner, acc_t<T>* values,
              int64_t* indices) {
  using A = acc_t<T>;
  const int64_t kb = (n + kRows - 1) / kRows, cb = (inner + kCols - 1) / kCols;
  // [outer, kb, inner] partials (the outputs themselves when kb == 1)
  std::vector<A> part_v(kb > 1 ? static_cast<size_t>(outer * kb * inner) : 0);
  std::vector<int64_t> part_i(part_v.size());
  A* dst_v = kb > 1 ? part_v.data() : values;
  int64_t* dst_i = kb > 1 ? part_i.data() : indices;
  const int64_t task = std::min(n, kRows) * std::min(inner, kCols);
  parallel_for(outer * kb * cb, std::max<int64_t>(1, kTaskElems / task),
               [&](int64_t t0, int64_t t1) {
                 const auto cols = static_cast<size_t>(std::min(inner, kCols));
                 std::vector<A> buf(cols);          // one row part widened
                 std::vector<int32_t> local(cols);  // argmax row within the block
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t o = t / (kb * cb), b = t / cb % kb, c0 = t % cb * kCols;
                   const int64_t w = std::min(kCols, inner - c0);
                   const int64_t k0 = b * kRows, k1 = std::min(n, k0 + kRows);
                   A* bv = dst_v + (o * kb + b) * inner + c0;  // [w]
                   int64_t* bi = dst_i + (o * kb + b) * inner + c0;
                   int32_t* li = local.data();
                   for (int64_t k = k0; k < k1; ++k) {
                     const T* row = x + (o * n + k) * inner + c0;
                     const A* p = as_acc(row, buf.data(), w);
                     if (k == k0) {
                       std::copy(p, p + w, bv);
                       std::fill(li, li + w, 0);
                       continue;
                     }
                     const auto kk = static_cast<int32_t>(k - k0);
                     for (int64_t i = 0; i < w; ++i) {  // branch-free so it vectorizes
                       const A v = p[i];
                       const bool take = (v > bv[i]) | ((v != v) & (bv[i] == bv[i]));
                       bv[i] = take ? v : bv[i];
                       li[i] = take ? kk : li[i];
                     }
                   }
                   for (int64_t i = 0; i < w; ++i) bi[i] = k0 + li[i];
                 }
               });
  if (kb == 1) return;
  for (int64_t o = 0; o < outer; ++o) {
    A* v = values + o * inner;  // [inner]
    int64_t* ix = indices + o * inner;
    const A* sv = part_v.data() + o * kb * inner;
    const int64_t* si = part_i.data() + o * kb * inner;
    std::copy(sv, sv + inner, v);
    std::copy(si, si + inner, ix);
    for (int64_t b = 1; b < kb; ++b)
      for (int64_t i = 0; i < inner; ++i)
        if (beats(sv[b * inner + i], v[i])) {
          v[i] = sv[b * inner + i];
          ix[i] = si[b * inner + i];
        }
  }
}

}  // namespace

std::pair<Tensor, Tensor> max_dim(const Tensor& x, ReduceGeometry g) {
  MIXPREC_CHECK(g.n >= 1, "max", "cannot take the max over an empty dim");
  Tensor values = Tensor::empty({g.outer, g.inner}, x.dtype());
  Tensor indices = Tensor::empty({g.outer, g.inner}, DType::i64);
  dispatch_compute(x.dtype(), "max", [&]<class T>() {
    using A = acc_t<T>;
    std::vector<A> v(static_cast<size_t>(g.outer * g.inner));  // [outer, inner], exact
    if (g.inner == 1)
      max_rows<T>(x.data<T>(), g.outer, g.n, v.data(), indices.data<int64_t>());
    else
      max_cols<T>(x.data<T>(), g.outer, g.n, g.inner, v.data(), indices.data<int64_t>());
    store_row(v.data(), values.data<T>(), g.outer * g.inner);  // widened values: exact
  });
  return {values, indices};
}

Tensor max_backward(const Tensor& grad, const Tensor& indices, ReduceGeometry g, DType dtype) {
  const Tensor ga = grad.to(reduce_acc_dtype(dtype)).contiguous();  // [outer, inner]
  Tensor out = Tensor::zeros({g.outer, g.n, g.inner}, dtype);
  dispatch_compute(dtype, "max backward", [&]<class T>() {
    using A = acc_t<T>;
    const int64_t m = g.outer * g.inner;
    std::vector<T> vals(static_cast<size_t>(m));  // grad rounded once into T
    store_row(ga.data<A>(), vals.data(), m);
    const int64_t* idx = indices.data<int64_t>();
    T* po = out.data<T>();  // [outer, n, inner]
    for (int64_t o = 0; o < g.outer; ++o)
      for (int64_t i = 0; i < g.inner; ++i)
        po[(o * g.n + idx[o * g.inner + i]) * g.inner + i] =
            vals[static_cast<size_t>(o * g.inner + i)];
  });
  return out;
}

}  // namespace mixprec::cpu
