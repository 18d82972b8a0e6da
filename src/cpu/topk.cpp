// topk along one dim and its backward. Values are ranked through integer keys (NaN above
// everything, -0 == +0) and ties go to the lower index: a strict total order, so the selection
// is unique whatever the algorithm: insertion into a sorted list for small k (the MoE router
// case), nth_element + sort otherwise.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/indexing.h"
#include "mixprec/cpu/row_io.h"
#include "mixprec/tensor/dispatch.h"
#include "task_size.h"

namespace mixprec::cpu {
namespace {

constexpr int64_t kInsertionMaxK = 32;
constexpr int64_t kGroup = 8;  // keys tested at once against the current k-th best

// Integer keys in the order topk ranks values: -0 == +0, and every NaN one key above +inf.
template <class A>
using key_t = std::conditional_t<std::is_same_v<A, double>, int64_t, int32_t>;

template <class A>
inline key_t<A> order_key(A v) {
  using K = key_t<A>;
  const K bits = std::bit_cast<K>(v);
  K key = bits < 0 ? bits ^ std::numeric_limits<K>::max() : bits;  // negatives: reverse order
  key = v == 0 ? 0 : key;
  return v != v ? std::numeric_limits<K>::max() : key;
}

template <bool Largest, class K>
inline bool better(K a, K b) {
  return Largest ? a > b : a < b;
}

// Whether any of key[0, kGroup) is better than `worst`, in 16-byte vectors.
template <bool Largest, class K>
inline bool any_better(const K* key, K worst) {
  typedef K V __attribute__((vector_size(16)));
  constexpr int64_t kW = 16 / sizeof(K);
  const V w = V{} + worst;
  V hit = V{};
  for (int64_t j = 0; j < kGroup; j += kW) {
    V v;
    std::memcpy(&v, key + j, sizeof(V));
    hit |= Largest ? v > w : v < w;
  }
  K any = 0;
  for (int64_t l = 0; l < kW; ++l) any |= hit[l];
  return any != 0;
}

// The positions of the k best keys of key[0, n), best first; ties keep index order.
template <bool Largest, class K>
void select_topk(const K* key, int64_t n, int64_t k, int64_t* top,
                 std::vector<std::pair<K, int64_t>>& scratch) {
  if (k <= kInsertionMaxK) {
    int64_t count = 0;
    K worst{};  // key of top[k - 1] once k are held
    for (int64_t t = 0; t < n; ++t) {
      if (count == k && t + kGroup <= n) {  // skip whole groups that cannot enter
        if (!any_better<Largest>(key + t, worst)) {
          t += kGroup - 1;
          continue;
        }
      }
      // A later position never beats an equal key, so ties stay in index order.
      if (count == k && !better<Largest>(key[t], worst)) continue;
      int64_t j = count < k ? count++ : k - 1;
      while (j > 0 && better<Largest>(key[t], key[top[j - 1]])) {
        top[j] = top[j - 1];
        --j;
      }
      top[j] = t;
      worst = key[top[count - 1]];
    }
    return;
  }
  scratch.resize(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) scratch[static_cast<size_t>(t)] = {key[t], t};
  auto before = [](const std::pair<K, int64_t>& a, const std::pair<K, int64_t>& b) {
    return better<Largest>(a.first, b.first) || (a.first == b.first && a.second < b.second);
  };
  std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end(), before);
  std::sort(scratch.begin(), scratch.begin() + k, before);
  for (int64_t j = 0; j < k; ++j) top[j] = scratch[static_cast<size_t>(j)].second;
}

template <class T, bool Largest>
void topk_lines(const T* px, ReduceGeometry g, int64_t k, T* pv, int64_t* pi) {
  using A = acc_t<T>;
  using K = key_t<A>;
  const int64_t n = g.n, inner = g.inner;
  parallel_for(g.outer * inner, std::max<int64_t>(1, kTaskElems / std::max<int64_t>(1, n)),
               [&](int64_t l0, int64_t l1) {
                 std::vector<A> line(static_cast<size_t>(n));  // x[o, :, i] widened
                 std::vector<K> keys(line.size());
                 std::vector<int64_t> top(static_cast<size_t>(k));
                 std::vector<std::pair<K, int64_t>> scratch;
                 for (int64_t l = l0; l < l1; ++l) {
                   const int64_t o = l / inner, i = l % inner;
                   const T* base = px + o * n * inner + i;
                   if (inner == 1) {
                     load_row(base, line.data(), n);
                   } else {
                     for (int64_t t = 0; t < n; ++t)
                       line[static_cast<size_t>(t)] = static_cast<A>(base[t * inner]);
                   }
                   for (int64_t t = 0; t < n; ++t)
                     keys[static_cast<size_t>(t)] = order_key(line[static_cast<size_t>(t)]);
                   select_topk<Largest>(keys.data(), n, k, top.data(), scratch);
                   for (int64_t j = 0; j < k; ++j) {
                     const int64_t t = top[static_cast<size_t>(j)];
                     pv[(o * k + j) * inner + i] = base[t * inner];
                     pi[(o * k + j) * inner + i] = t;
                   }
                 }
               });
}

}  // namespace

std::pair<Tensor, Tensor> topk(const Tensor& x, ReduceGeometry g, int64_t k, bool largest) {
  Tensor values = Tensor::empty({g.outer, k, g.inner}, x.dtype());
  Tensor indices = Tensor::empty({g.outer, k, g.inner}, DType::i64);
  if (k == 0) return {values, indices};
  dispatch_compute(x.dtype(), "topk", [&]<class T>() {
    // x [outer, n, inner] -> values, indices [outer, k, inner]
    if (largest)
      topk_lines<T, true>(x.data<T>(), g, k, values.data<T>(), indices.data<int64_t>());
    else
      topk_lines<T, false>(x.data<T>(), g, k, values.data<T>(), indices.data<int64_t>());
  });
  return {values, indices};
}

Tensor topk_backward(const Tensor& grad, const Tensor& indices, ReduceGeometry g, int64_t k,
                     DType dtype) {
  const Tensor ga = grad.to(reduce_acc_dtype(dtype)).contiguous();  // [outer, k, inner]
  Tensor out = Tensor::zeros({g.outer, g.n, g.inner}, dtype);
  dispatch_compute(dtype, "topk backward", [&]<class T>() {
    using A = acc_t<T>;
    const int64_t inner = g.inner, n = g.n;
    const A* pg = ga.data<A>();
    const int64_t* pi = indices.data<int64_t>();
    T* po = out.data<T>();  // [outer, n, inner]
    // The indices of one line are distinct: plain stores, no accumulation.
    parallel_for(g.outer, std::max<int64_t>(1, kTaskElems / std::max<int64_t>(1, k * inner)),
                 [&](int64_t o0, int64_t o1) {
                   for (int64_t o = o0; o < o1; ++o)
                     for (int64_t e = o * k * inner; e < (o + 1) * k * inner; ++e)
                       po[(o * n + pi[e]) * inner + e % inner] = static_cast<T>(pg[e]);
                 });
  });
  return out;
}

}  // namespace mixprec::cpu
