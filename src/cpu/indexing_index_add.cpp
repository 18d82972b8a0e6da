// index_add and its source gradient (a scaled index_select), as row operations: the MoE
// dispatch path moves whole token rows, so rows are widened once, added, and rounded once.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/indexing.h"
#include "mixprec/cpu/row_io.h"
#include "mixprec/tensor/dispatch.h"

namespace mixprec::cpu {
namespace {

// Source rows of each target row, ascending: sources of t are order[start[t], start[t+1]).
struct Buckets {
  std::vector<int64_t> start;  // [n + 1]
  std::vector<int64_t> order;  // [m]
};

template <class I>
Buckets bucket_by_target(const I* index, int64_t m, int64_t n) {
  Buckets b{std::vector<int64_t>(static_cast<size_t>(n + 1), 0),
            std::vector<int64_t>(static_cast<size_t>(m))};
  for (int64_t i = 0; i < m; ++i) ++b.start[static_cast<size_t>(index[i]) + 1];
  for (int64_t t = 0; t < n; ++t)
    b.start[static_cast<size_t>(t + 1)] += b.start[static_cast<size_t>(t)];
  std::vector<int64_t> cursor(b.start.begin(), b.start.end() - 1);
  for (int64_t i = 0; i < m; ++i)
    b.order[static_cast<size_t>(cursor[static_cast<size_t>(index[i])]++)] = i;
  return b;
}

template <class T>
void index_add_rows(const T* x, ReduceGeometry g, const Buckets& b, const T* src, int64_t m,
                    acc_t<T> alpha, T* out) {
  using A = acc_t<T>;
  const int64_t inner = g.inner;
  const auto row_bytes = static_cast<size_t>(inner) * sizeof(T);
  parallel_for(g.outer * g.n, rows_per_chunk(inner), [&](int64_t r0, int64_t r1) {
    std::vector<A> acc(static_cast<size_t>(inner)), tmp(acc.size());  // one row each
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / g.n, t = r % g.n;
      const int64_t q0 = b.start[static_cast<size_t>(t)], q1 = b.start[static_cast<size_t>(t + 1)];
      if (q0 == q1) {  // untouched row: same bits
        std::memcpy(out + r * inner, x + r * inner, row_bytes);
        continue;
      }
      load_row(x + r * inner, acc.data(), inner);
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t i = b.order[static_cast<size_t>(q)];
        load_row(src + (o * m + i) * inner, tmp.data(), inner);
        for (int64_t c = 0; c < inner; ++c)
          acc[static_cast<size_t>(c)] += alpha * tmp[static_cast<size_t>(c)];
      }
      store_row(acc.data(), out + r * inner, inner);
    }
  });
}

}  // namespace

Tensor index_add(const Tensor& x, ReduceGeometry g, const Tensor& index, const Tensor& source,
                 double alpha) {
  const int64_t m = index.numel();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const Buckets b = dispatch_index(
      index, "index_add", [&]<class I>() { return bucket_by_target(index.data<I>(), m, g.n); });
  dispatch_compute(x.dtype(), "index_add", [&]<class T>() {
    index_add_rows<T>(x.data<T>(), g, b, source.data<T>(), m, static_cast<acc_t<T>>(alpha),
                      out.data<T>());
  });
  return out;
}

Tensor index_select_scaled(const Tensor& grad, ReduceGeometry g, const Tensor& index, double alpha,
                           DType dtype) {
  // f64 meets f64 only: a mixed pair computes in the output dtype.
  const bool f64_mismatch = (grad.dtype() == DType::f64) != (dtype == DType::f64);
  const Tensor gc = (f64_mismatch ? grad.to(dtype) : grad).contiguous();  // [outer, n, inner]
  const int64_t m = index.numel(), inner = g.inner;
  Tensor out = Tensor::empty({g.outer, m, inner}, dtype);
  dispatch_index(index, "index_add backward", [&]<class I>() {
    const I* ix = index.data<I>();
    dispatch_compute(gc.dtype(), "index_add backward", [&]<class TG>() {
      dispatch_compute(dtype, "index_add backward", [&]<class TO>() {
        using A = acc_t<TO>;
        if constexpr (std::is_same_v<acc_t<TG>, A>) {
          const TG* pg = gc.data<TG>();
          TO* po = out.data<TO>();
          const bool copy = std::is_same_v<TG, TO> && alpha == 1.0;
          const A a = static_cast<A>(alpha);
          parallel_for(g.outer * m, rows_per_chunk(inner), [&](int64_t r0, int64_t r1) {
            std::vector<A> buf(copy ? 0 : static_cast<size_t>(inner));  // one row widened
            for (int64_t r = r0; r < r1; ++r) {
              const int64_t o = r / m, i = r % m;
              const TG* row = pg + (o * g.n + static_cast<int64_t>(ix[i])) * inner;
              if (copy) {
                std::memcpy(static_cast<void*>(po + r * inner), row,
                            static_cast<size_t>(inner) * sizeof(TO));
                continue;
              }
              load_row(row, buf.data(), inner);
              for (auto& v : buf) v *= a;
              store_row(buf.data(), po + r * inner, inner);
            }
          });
        }
      });
    });
  });
  return out;
}

}  // namespace mixprec::cpu
