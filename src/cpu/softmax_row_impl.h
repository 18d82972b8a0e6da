// The RowOps kernels (softmax_row_ops.h), written once over a SIMD vector type P::V (GCC/Clang
// vector extensions) and compiled per ISA: softmax_row_ops.cpp (portable, and f64),
// softmax_row_ops_avx2.cpp (AVX2+FMA), softmax_row_ops_avx512.cpp (AVX-512). P names the
// scalar S, the vector V, for f32 the same-sized uint32 vector U and clamp(x, lo, hi) (NaN
// stays NaN; an ISA may use min/max instructions). Everything here has internal linkage, so an
// AVX instantiation can never be picked by the linker for the portable path. Includers provide
// <cmath>, <cstdint>, <cstring> and <type_traits> first (before any target pragma).
#pragma once

#include "../numerics/vector_storage.h"
#include "softmax_row_ops.h"

namespace mixprec::cpu {
namespace {  // NOLINT(google-build-namespaces): one private copy per ISA translation unit

// Rows are walked 4 vectors at a time with one accumulator per vector (kAcc), then the
// leftover vectors (the last one partial) go to accumulators 0, 1, 2 in turn: a fixed order.
constexpr int kAcc = 4;
// The first pass over a row prefetches this many elements ahead (into the next row): rows
// stream from memory, and the hardware prefetcher alone leaves the loads waiting.
constexpr int64_t kPrefetchAhead = 1024;

template <class P>
struct Lanes {
  using S = typename P::S;
  using V = typename P::V;
  static constexpr int64_t N = sizeof(V) / sizeof(S);

  static V load(const S* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  // A whole vector from bf16 / f16 storage.
  static V load(const bf16* p) { return simd::StorageLanes<static_cast<int>(N)>::load(p); }
  static V load(const f16* p) { return simd::StorageLanes<static_cast<int>(N)>::load(p); }
  // The first c lanes from p, `fill` in the others.
  template <class T>
  static V load(const T* p, int64_t c, S fill) {
    if (c == N) return load(p);
    S b[N];
    for (int64_t j = 0; j < N; ++j) b[j] = j < c ? static_cast<S>(p[j]) : fill;
    return load(b);
  }
  static void store(S* p, V v) { std::memcpy(p, &v, sizeof v); }
  // Rounded to nearest even (vector_storage.h).
  static void store(bf16* p, V v) { simd::StorageLanes<static_cast<int>(N)>::store(p, v); }
  static void store(f16* p, V v) { simd::StorageLanes<static_cast<int>(N)>::store(p, v); }
  template <class T>
  static void store(T* p, V v, int64_t c) {
    if (c == N) return store(p, v);
    T b[N];
    store(b, v);
    for (int64_t j = 0; j < c; ++j) p[j] = b[j];
  }
  static V splat(S x) { return V{} + x; }
  // Zeroes lanes c..N-1 (padding must not enter a sum).
  static V keep(V v, int64_t c) {
    for (int64_t j = c; j < N; ++j) v[j] = 0;
    return v;
  }
  static V vmax(V a, V b) { return a > b ? a : b; }  // NaN in a: b

  // f(i, c, k): the vector at element i with c lanes (c < N only for the last), accumulator k.
  template <class F>
  static void walk(int64_t n, F&& f) {
    int64_t i = 0;
    for (; i + kAcc * N <= n; i += kAcc * N)
      for (int k = 0; k < kAcc; ++k) f(i + k * N, N, k);
    for (int k = 0; i < n; i += N, ++k) f(i, n - i < N ? n - i : N, k);
  }

  static S hsum(const V (&acc)[kAcc]) {
    const V t = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    S b[N];
    std::memcpy(b, &t, sizeof t);
    for (int64_t w = N / 2; w > 0; w /= 2)
      for (int64_t j = 0; j < w; ++j) b[j] += b[j + w];
    return b[0];
  }

  // exp per lane. f32: exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n ln2 in
  // [-ln2/2, ln2/2] (ln2 split in two so n * ln2_hi is exact), exp(r) by the Cephes expf
  // polynomial; x clamped to [-88, 88] (at -88, n = -127 and 2^n underflows to 0).
  static V exp(V x) {
    if constexpr (std::is_same_v<S, float>) {
      using U = typename P::U;
      x = P::clamp(x, -88.0f, 88.0f);
      const V magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
      const V t = x * 1.44269504088896341f + magic;
      const V n = t - magic;
      const V r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
      V p = splat(1.9875691500e-4f);
      p = p * r + 1.3981999507e-3f;
      p = p * r + 8.3334519073e-3f;
      p = p * r + 4.1665795894e-2f;
      p = p * r + 1.6666665459e-1f;
      p = p * r + 5.0000001201e-1f;
      p = p * (r * r) + r + 1.0f;
      // t's low mantissa bits hold n + 2^22, so 2^n is (bits(t) - bits(magic) + 127) << 23.
      U bits;
      std::memcpy(&bits, &t, sizeof t);
      bits = (bits - 0x4B400000u + 127u) << 23;
      V scale;
      std::memcpy(&scale, &bits, sizeof bits);
      return p * scale;
    } else {
      for (int64_t j = 0; j < N; ++j) x[j] = std::exp(x[j]);
      return x;
    }
  }
};

template <class P, class T = typename P::S>
typename P::S row_max(const T* x, int64_t n) {
  using L = Lanes<P>;
  using S = typename P::S;
  const S lowest = -INFINITY;
  typename P::V acc[kAcc] = {L::splat(lowest), L::splat(lowest), L::splat(lowest),
                             L::splat(lowest)};
  L::walk(n, [&](int64_t i, int64_t c, int k) {
    __builtin_prefetch(x + i + kPrefetchAhead);
    acc[k] = L::vmax(L::load(x + i, c, lowest), acc[k]);
  });
  const typename P::V t = L::vmax(L::vmax(acc[0], acc[1]), L::vmax(acc[2], acc[3]));
  S m = t[0];
  for (int64_t j = 1; j < L::N; ++j) m = t[j] > m ? t[j] : m;
  return m;
}

template <class P, class T = typename P::S>
typename P::S row_sum(const T* x, int64_t n) {
  using L = Lanes<P>;
  typename P::V acc[kAcc] = {};
  L::walk(n, [&](int64_t i, int64_t c, int k) {
    __builtin_prefetch(x + i + kPrefetchAhead);
    acc[k] += L::load(x + i, c, 0);
  });
  return L::hsum(acc);
}

template <class P>
typename P::S row_dot(const typename P::S* a, const typename P::S* b, int64_t n) {
  using L = Lanes<P>;
  typename P::V acc[kAcc] = {};
  L::walk(n, [&](int64_t i, int64_t c, int k) {
    acc[k] += L::load(a + i, c, 0) * L::load(b + i, c, 0);
  });
  return L::hsum(acc);
}

// Sum of exp(x - shift); with Store, also the terms in out.
template <class P, bool Store, class T = typename P::S>
typename P::S exp_sum(const T* x, typename P::S shift, typename P::S* out, int64_t n) {
  using L = Lanes<P>;
  typename P::V acc[kAcc] = {};
  L::walk(n, [&](int64_t i, int64_t c, int k) {
    const typename P::V e = L::exp(L::load(x + i, c, 0) - shift);
    if constexpr (Store) L::store(out + i, e, c);
    acc[k] += L::keep(e, c);
  });
  return L::hsum(acc);
}

template <class P>
typename P::S exp_shifted_sum(const typename P::S* x, typename P::S shift, typename P::S* out,
                              int64_t n) {
  return exp_sum<P, true>(x, shift, out, n);
}

template <class P>
void exp_row(const typename P::S* x, typename P::S* out, int64_t n) {
  using L = Lanes<P>;
  L::walk(n,
          [&](int64_t i, int64_t c, int) { L::store(out + i, L::exp(L::load(x + i, c, 0)), c); });
}

template <class P>
void add_row(typename P::S* out, const typename P::S* x, int64_t n) {
  using L = Lanes<P>;
  L::walk(n, [&](int64_t i, int64_t c, int) {
    L::store(out + i, L::load(out + i, c, 0) + L::load(x + i, c, 0), c);
  });
}

// The forward kernels read a row stored as T and write one (y may be x): T == S is the
// in-place RowOps form, T = bf16/f16 widens on load and rounds once on store.
template <class P, class T>
void softmax_row(const T* x, T* y, typename P::S* buf, int64_t n, typename P::S* max,
                 typename P::S* log_sum) {
  using L = Lanes<P>;
  using S = typename P::S;
  *max = row_max<P>(x, n);
  const S sum = exp_sum<P, true>(x, *max, buf, n);
  *log_sum = std::log(sum);
  const S inv_sum = S(1) / sum;
  L::walk(n,
          [&](int64_t i, int64_t c, int) { L::store(y + i, L::load(buf + i, c, 0) * inv_sum, c); });
}

template <class P, class T>
void log_softmax_row(const T* x, T* y, int64_t n, typename P::S* max, typename P::S* log_sum) {
  using L = Lanes<P>;
  using S = typename P::S;
  const S m = row_max<P>(x, n);
  const S ls = std::log(exp_sum<P, false>(x, m, nullptr, n));
  *max = m;
  *log_sum = ls;
  L::walk(n,
          [&](int64_t i, int64_t c, int) { L::store(y + i, (L::load(x + i, c, 0) - m) - ls, c); });
}

// p = exp((x - max) - log_sum) for c lanes at x + i.
template <class P, class T = typename P::S>
typename P::V probs(const T* x, int64_t i, int64_t c, typename P::S max, typename P::S log_sum) {
  using L = Lanes<P>;
  return L::exp((L::load(x + i, c, 0) - max) - log_sum);
}

// Backward kernels: x and g (dy) stored as T, dx written as T (dx may be x; for T == S, buf
// may be x too).
template <class P, class T>
void softmax_backward_row(const T* x, const T* g, T* dx, typename P::S* buf, int64_t n,
                          typename P::S max, typename P::S log_sum) {
  using L = Lanes<P>;
  using V = typename P::V;
  V acc[kAcc] = {};  // <g, p>
  L::walk(n, [&](int64_t i, int64_t c, int k) {
    __builtin_prefetch(x + i + kPrefetchAhead);
    __builtin_prefetch(g + i + kPrefetchAhead);
    const V p = probs<P>(x, i, c, max, log_sum);
    L::store(buf + i, p, c);
    acc[k] += L::keep(p * L::load(g + i, c, 0), c);
  });
  const typename P::S dot = L::hsum(acc);
  L::walk(n, [&](int64_t i, int64_t c, int) {
    L::store(dx + i, L::load(buf + i, c, 0) * (L::load(g + i, c, 0) - dot), c);
  });
}

template <class P, class T>
void log_softmax_backward_row(const T* x, const T* g, T* dx, int64_t n, typename P::S max,
                              typename P::S log_sum) {
  using L = Lanes<P>;
  const typename P::S s = row_sum<P>(g, n);
  L::walk(n, [&](int64_t i, int64_t c, int) {
    __builtin_prefetch(x + i + kPrefetchAhead);
    L::store(dx + i, L::load(g + i, c, 0) - probs<P>(x, i, c, max, log_sum) * s, c);
  });
}

template <class P, class T>
void norm_forward_row(const T* x, T* y, const typename P::S* w, const typename P::S* b, int64_t n,
                      typename P::S eps, bool center, typename P::S* mean, typename P::S* rstd) {
  using L = Lanes<P>;
  using S = typename P::S;
  using V = typename P::V;
  const S inv_n = S(1) / static_cast<S>(n);
  const S mu = center ? row_sum<P>(x, n) * inv_n : S(0);
  V acc[kAcc] = {};  // sum of (x - mu)^2
  L::walk(n, [&](int64_t i, int64_t c, int k) {
    if (!center) __builtin_prefetch(x + i + kPrefetchAhead);  // the first pass over x
    const V d = L::keep(L::load(x + i, c, 0) - mu, c);
    acc[k] += d * d;
  });
  const S rs = S(1) / std::sqrt(L::hsum(acc) * inv_n + eps);
  if (center) *mean = mu;
  *rstd = rs;
  L::walk(n, [&](int64_t i, int64_t c, int) {
    V v = (L::load(x + i, c, 0) - mu) * rs;
    if (w) v *= L::load(w + i, c, 0);
    if (b) v += L::load(b + i, c, 0);
    L::store(y + i, v, c);
  });
}

// Adds dy * xhat to dw and dy to db (either may be null); with dx, dx = rstd * (g*w -
// mean(g*w) - xhat * mean(g*w * xhat)) (no mean(g*w) term unless `center`). The second pass
// recomputes xhat and g*w from x and g rather than keeping them.
template <class P, class T>
void norm_backward_row(const T* x, const T* g, const typename P::S* w, typename P::S mean,
                       typename P::S rstd, int64_t n, bool center, typename P::S* dw,
                       typename P::S* db, T* dx) {
  using L = Lanes<P>;
  using S = typename P::S;
  using V = typename P::V;
  V acc_gx[kAcc] = {}, acc_g[kAcc] = {};  // sums of g*w * xhat and of g*w
  L::walk(n, [&](int64_t i, int64_t c, int k) {
    __builtin_prefetch(x + i + kPrefetchAhead);
    __builtin_prefetch(g + i + kPrefetchAhead);
    const V xhat = (L::load(x + i, c, 0) - mean) * rstd;
    V gi = L::load(g + i, c, 0);
    if (dw) L::store(dw + i, L::load(dw + i, c, 0) + gi * xhat, c);
    if (db) L::store(db + i, L::load(db + i, c, 0) + gi, c);
    if (!dx) return;
    if (w) gi *= L::load(w + i, c, 0);
    acc_gx[k] += L::keep(gi * xhat, c);
    acc_g[k] += L::keep(gi, c);
  });
  if (!dx) return;
  const S inv_n = S(1) / static_cast<S>(n);
  const S c1 = L::hsum(acc_gx) * inv_n, c2 = center ? L::hsum(acc_g) * inv_n : S(0);
  L::walk(n, [&](int64_t i, int64_t c, int) {
    const V xhat = (L::load(x + i, c, 0) - mean) * rstd;
    V gi = L::load(g + i, c, 0);
    if (w) gi *= L::load(w + i, c, 0);
    L::store(dx + i, ((gi - c2) - xhat * c1) * rstd, c);
  });
}

template <class P, class T>
typename P::S ce_forward_row(const T* x, int64_t n, int64_t target, typename P::S* max,
                             typename P::S* log_sum) {
  using S = typename P::S;
  const S m = row_max<P>(x, n);
  *max = m;
  *log_sum = std::log(exp_sum<P, false>(x, m, nullptr, n));
  return (m - static_cast<S>(x[target])) + *log_sum;
}

// dx may be x.
template <class P, class T>
void ce_backward_row(const T* x, T* dx, int64_t n, int64_t target, typename P::S max,
                     typename P::S log_sum, typename P::S scale) {
  using L = Lanes<P>;
  using S = typename P::S;
  // p[target] through the same vector exp as every other element, then minus one.
  const S p_target = L::exp(L::splat((static_cast<S>(x[target]) - max) - log_sum))[0];
  L::walk(n, [&](int64_t i, int64_t c, int) {
    __builtin_prefetch(x + i + kPrefetchAhead);  // the backward pass's first touch of x
    L::store(dx + i, probs<P>(x, i, c, max, log_sum) * scale, c);
  });
  dx[target] = T((p_target - S(1)) * scale);
}

template <class P>
constexpr RowOps<typename P::S> make_row_ops() {
  return {&row_max<P>, &row_sum<P>, &row_dot<P>, &exp_shifted_sum<P>, &exp_row<P>, &add_row<P>};
}

template <class P, class T>
constexpr StoredRowOps<T> make_stored_row_ops();

// Every f32-math table of one ISA build.
template <class P>
constexpr RowKernels make_row_kernels() {
  return {make_row_ops<P>(), make_stored_row_ops<P, float>(), make_stored_row_ops<P, bf16>(),
          make_stored_row_ops<P, f16>()};
}

template <class P, class T>
constexpr StoredRowOps<T> make_stored_row_ops() {
  return {&softmax_row<P, T>,
          &log_softmax_row<P, T>,
          &norm_forward_row<P, T>,
          &ce_forward_row<P, T>,
          &ce_backward_row<P, T>,
          &softmax_backward_row<P, T>,
          &log_softmax_backward_row<P, T>,
          &norm_backward_row<P, T>};
}

}  // namespace
}  // namespace mixprec::cpu
