// Embedding: forward copies weight rows; backward sorts positions by id (a stable counting
// sort) and lets each id's gradient row be summed by one thread, in position order. No atomics,
// and the same bits whatever the thread count.
#include "mixprec/cpu/embedding.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/row_io.h"
#include "mixprec/cpu/softmax.h"
#include "mixprec/tensor/dispatch.h"
#include "softmax_row_ops.h"

namespace mixprec::cpu {
namespace {

// ids (i32/i64, contiguous) as i64, each checked against [0, V).
std::vector<int64_t> checked_ids(const Tensor& ids, int64_t V, const char* where) {
  std::vector<int64_t> out(static_cast<size_t>(ids.numel()));
  if (ids.dtype() == DType::i64) {
    const int64_t* p = ids.data<int64_t>();
    out.assign(p, p + out.size());
  } else {
    const int32_t* p = ids.data<int32_t>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  }
  for (size_t i = 0; i < out.size(); ++i)
    MIXPREC_CHECK(out[i] >= 0 && out[i] < V, where,
                  "id " + std::to_string(out[i]) + " at flat position " + std::to_string(i) +
                      " of ids " + shape_to_string(ids.shape()) + " is outside [0, " +
                      std::to_string(V) + ")");
  return out;
}

// gw [V, D] = per-id sums of dy rows; dy [n, D] in g_dtype; start [V + 1], order [n].
// A row's first gradient is widened straight into it; dy rows already in A are added in place.
template <class A>
void scatter_rows(const void* dy, DType g_dtype, const std::vector<int64_t>& start,
                  const std::vector<int64_t>& order, A* gw, int64_t V, int64_t D) {
  const size_t g_size = dtype_size(g_dtype);
  const bool direct = g_dtype == dtype_of<A>();
  const RowOps<A>& ops = row_ops<A>();
  auto dy_row = [&](int64_t k) {
    return static_cast<const char*>(dy) + order[static_cast<size_t>(k)] * D * g_size;
  };
  parallel_for(V, rows_per_chunk(D), [&](int64_t v0, int64_t v1) {
    std::vector<A> row(direct ? 0 : static_cast<size_t>(D));  // [D] one dy row, widened
    for (int64_t v = v0; v < v1; ++v) {
      A* out = gw + v * D;
      const int64_t k0 = start[static_cast<size_t>(v)], k1 = start[static_cast<size_t>(v) + 1];
      if (k0 == k1) std::fill(out, out + D, A(0));
      if (k0 < k1) load_grad_row(g_dtype, dy_row(k0), out, D);
      for (int64_t k = k0 + 1; k < k1; ++k) {
        const A* add = reinterpret_cast<const A*>(dy_row(k));
        if (!direct) {
          load_grad_row(g_dtype, dy_row(k), row.data(), D);
          add = row.data();
        }
        ops.add(out, add, D);
      }
    }
  });
}

}  // namespace

Tensor embedding_forward(const Tensor& ids, const Tensor& weight) {
  const int64_t V = weight.size(0), D = weight.size(1);
  const std::vector<int64_t> id = checked_ids(ids, V, "embedding");
  Shape shape = ids.shape();
  shape.push_back(D);
  Tensor out = Tensor::empty(shape, weight.dtype());
  const size_t row_bytes = static_cast<size_t>(D) * weight.element_size();
  const char* w = static_cast<const char*>(weight.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  parallel_for(static_cast<int64_t>(id.size()), rows_per_chunk(D), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(o + static_cast<size_t>(i) * row_bytes,
                  w + static_cast<size_t>(id[static_cast<size_t>(i)]) * row_bytes, row_bytes);
  });
  return out;
}

Tensor embedding_backward(const Tensor& ids, const Tensor& dy, int64_t V, DType acc) {
  const char* where = "embedding backward";
  Shape expect = ids.shape();
  const int64_t D = dy.ndim() > 0 ? dy.size(-1) : 0;
  expect.push_back(D);
  MIXPREC_CHECK(dy.shape() == expect, where,
                "gradient shape " + shape_to_string(dy.shape()) + " does not match ids " +
                    shape_to_string(ids.shape()) + " plus the embedding dim");
  const std::vector<int64_t> id = checked_ids(ids, V, where);
  // Stable counting sort of positions by id: order[start[v] .. start[v+1]) are v's positions.
  std::vector<int64_t> start(static_cast<size_t>(V) + 1, 0);
  for (const int64_t v : id) ++start[static_cast<size_t>(v) + 1];
  for (size_t v = 0; v < static_cast<size_t>(V); ++v) start[v + 1] += start[v];
  std::vector<int64_t> order(id.size());
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (size_t i = 0; i < id.size(); ++i)
    order[static_cast<size_t>(next[static_cast<size_t>(id[i])]++)] = static_cast<int64_t>(i);
  const Tensor g = grad_rows(dy, acc, where);
  Tensor gw = Tensor::empty({V, D}, acc);
  if (acc == DType::f64)
    scatter_rows(g.raw_data(), g.dtype(), start, order, gw.data<double>(), V, D);
  else
    scatter_rows(g.raw_data(), g.dtype(), start, order, gw.data<float>(), V, D);
  return gw;
}

}  // namespace mixprec::cpu
