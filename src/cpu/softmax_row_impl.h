// The RowOps kernels (softmax_row_ops.h), written once over a SIMD vector type P::V (GCC/Clang
// vector extensions) and compiled per ISA: softmax_row_ops.cpp (portable, and f64),
// softmax_row_ops_avx2.cpp (AVX2+FMA), softmax_row_ops_avx512.cpp (AVX-512) and
// softmax_row_ops_avx512_bf16.cpp (its bf16 rows with AVX512_BF16). P names the scalar S, the
// vector V, and for f32: the same-sized uint32 vector U, clamp(x, lo, hi) (NaN stays NaN; an
// ISA may use min/max instructions), kFma (a * b + c is one FMA) and kScalef (true:
// P::scalef(p, n) = p * 2^n and P::clamp_low(x, lo) exist). P may also bring its own bf16 row
// access, load_bf16 and store_bf16, with the bits of vector_storage.h's. Everything here has
// internal linkage, so an AVX instantiation can never be picked by the linker for the
// portable path. Includers provide <cmath>, <cstdint>, <cstring>, <type_traits> and <utility>
// first (before any target pragma).
#pragma once

#include "../numerics/vector_storage.h"
#include "softmax_row_ops.h"

namespace mixprec::cpu {
namespace {  // NOLINT(google-build-namespaces): one private copy per ISA translation unit

// Rows are walked 4 vectors at a time with one accumulator per vector (kAcc), then the
// leftover vectors (the last one partial) go to accumulators 0, 1, 2 in turn: a fixed order.
constexpr int kAcc = 4;
// The first pass over a row prefetches this many elements ahead (into the next row): rows
// stream from memory, and the hardware prefetcher alone leaves the loads waiting. The pass
// that first writes an output row prefetches it the same way, so its stores do not wait
// for the lines to arrive (~10% on rows beyond L2).
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
  static V load(const bf16* p) {
    if constexpr (requires { P::load_bf16(p); })
      return P::load_bf16(p);
    else
      return simd::StorageLanes<static_cast<int>(N)>::load(p);
  }
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
  static void store(bf16* p, V v) {
    if constexpr (requires { P::store_bf16(p, v); })
      P::store_bf16(p, v);
    else
      simd::StorageLanes<static_cast<int>(N)>::store(p, v);
  }
  static void store(f16* p, V v) { simd::StorageLanes<static_cast<int>(N)>::store(p, v); }
  template <class T>
  static void store(T* p, V v, int64_t c) {
    if (c == N) return store(p, v);
    T b[N];
    store(b, v);
    for (int64_t j = 0; j < c; ++j) p[j] = b[j];
  }
  // store(p, v, c) for a v the caller knows holds no subnormal: P may skip its check then.
  template <class T>
  static void store_normal(T* p, V v, int64_t c) {
    if constexpr (std::is_same_v<T, bf16> && requires { P::store_bf16_normal(p, v); }) {
      if (c == N) return P::store_bf16_normal(p, v);
    }
    store(p, v, c);
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

  // Lanes [0, M/2) and [M/2, M) of w (M lanes), or its even and odd lanes, as vectors.
  template <class W, size_t... I>
  static auto low_half(W w, std::index_sequence<I...>) {
    return __builtin_shufflevector(w, w, I...);
  }
  template <class W, size_t... I>
  static auto high_half(W w, std::index_sequence<I...>) {
    return __builtin_shufflevector(w, w, (I + sizeof...(I))...);
  }
  template <class W, size_t... I>
  static auto even_lanes(W w, std::index_sequence<I...>) {
    return __builtin_shufflevector(w, w, (2 * I)...);
  }
  template <class W, size_t... I>
  static auto odd_lanes(W w, std::index_sequence<I...>) {
    return __builtin_shufflevector(w, w, (2 * I + 1)...);
  }
  template <class W>
  static constexpr size_t kHalf = sizeof(W) / sizeof(S) / 2;

  // The lanes' sum, lane j + lane j + M/2 at each level (M the lanes left): the tree of the
  // scalar loop `for w = M/2 ... 1: b[j] += b[j + w]`, kept in registers (the next pass
  // waits for it).
  template <class W>
  static S sum_lanes(W w) {
    if constexpr (kHalf<W> == 1)
      return w[0] + w[1];
    else
      return sum_lanes(low_half(w, std::make_index_sequence<kHalf<W>>()) +
                       high_half(w, std::make_index_sequence<kHalf<W>>()));
  }
  static S hsum(const V (&acc)[kAcc]) { return sum_lanes((acc[0] + acc[1]) + (acc[2] + acc[3])); }

  // The largest lane; among equal ones (-0 and +0) the first, as a scan in lane order picks
  // it, by a tree of neighbouring pairs: a short latency, and the next pass waits for it.
  template <class W>
  static S max_lanes(W w) {
    if constexpr (kHalf<W> == 1) {
      return w[1] > w[0] ? w[1] : w[0];
    } else {
      const auto even = even_lanes(w, std::make_index_sequence<kHalf<W>>());
      const auto odd = odd_lanes(w, std::make_index_sequence<kHalf<W>>());
      return max_lanes(odd > even ? odd : even);
    }
  }
  static S hmax(V t) { return max_lanes(t); }

  // exp per lane. f32: exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n ln2 in
  // [-ln2/2, ln2/2] (ln2 split in two so n * ln2_hi is exact), exp(r) by a degree-6
  // polynomial; x clamped to [-88, 88] (at -88, n = -127 and 2^n underflows to 0). With
  // P::kScalef (AVX-512) one vscalefps multiplies by 2^n, and 2^n * exp(r) underflows
  // gradually: x is clamped to [-104, 88] instead (exp(-104) rounds to 0), and to [-104, inf)
  // when kNonPositive (x <= 0 or NaN: the shifted arguments of softmax and cross-entropy).
  template <bool kNonPositive = false>
  static V exp(V x) {
    if constexpr (std::is_same_v<S, float>) {
      if constexpr (!P::kScalef)
        x = P::clamp(x, -88.0f, 88.0f);
      else if constexpr (kNonPositive)
        x = P::clamp_low(x, -104.0f);
      else
        x = P::clamp(x, -104.0f, 88.0f);
      const V magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
      const V t = x * 1.44269504088896341f + magic;
      const V n = t - magic;
      const V r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
      // exp(r) = 1 + r + r^2 P(r), P of degree 4 fitted for the least maximum relative error
      // on the interval (3.8e-9, with these float coefficients), by Horner's scheme: to the
      // end with FMA (1 + r (1 + r P), one rounding a step), else as r^2 P + r + 1 (each
      // product rounded: the small terms first).
      V p = splat(1.3814627891e-3f);
      p = p * r + 8.3687137812e-3f;
      p = p * r + 4.1668388993e-2f;
      p = p * r + 1.6666521132e-1f;
      p = p * r + 4.9999994040e-1f;
      if constexpr (P::kFma) {
        p = p * r + 1.0f;
        p = p * r + 1.0f;
      } else {
        p = p * (r * r) + r + 1.0f;
      }
      if constexpr (P::kScalef) {
        return P::scalef(p, n);
      } else {
        // t's low mantissa bits hold n + 2^22, so 2^n is (bits(t) - bits(magic) + 127) << 23.
        using U = typename P::U;
        U bits;
        std::memcpy(&bits, &t, sizeof t);
        bits = (bits - 0x4B400000u + 127u) << 23;
        V scale;
        std::memcpy(&scale, &bits, sizeof bits);
        return p * scale;
      }
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
  return L::hmax(L::vmax(L::vmax(acc[0], acc[1]), L::vmax(acc[2], acc[3])));
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

// Sum of exp(x - shift); with Store, also the terms in out. kRowMax: shift is the row max, so
// x - shift <= 0 (see Lanes::exp).
template <class P, bool Store, bool kRowMax, class T = typename P::S>
typename P::S exp_sum(const T* x, typename P::S shift, typename P::S* out, int64_t n) {
  using L = Lanes<P>;
  typename P::V acc[kAcc] = {};
  L::walk(n, [&](int64_t i, int64_t c, int k) {
    const typename P::V e = L::template exp<kRowMax>(L::load(x + i, c, 0) - shift);
    if constexpr (Store && std::is_same_v<T, typename P::S>)
      __builtin_prefetch(out + i + kPrefetchAhead, 1);  // out is the output row
    if constexpr (Store) L::store(out + i, e, c);
    acc[k] += L::keep(e, c);
  });
  return L::hsum(acc);
}

template <class P>
typename P::S exp_shifted_sum(const typename P::S* x, typename P::S shift, typename P::S* out,
                              int64_t n) {
  return exp_sum<P, true, false>(x, shift, out, n);
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

// The sum of exp(x - shift), with x - shift stored in out on the way (log-softmax's second
// pass needs it, and rereading and widening x would cost more than the store). The sum
// matches exp_sum's bit for bit.
template <class P, class T>
typename P::S shifted_exp_sum(const T* x, typename P::S shift, typename P::S* out, int64_t n) {
  using L = Lanes<P>;
  using V = typename P::V;
  V acc[kAcc] = {};
  L::walk(n, [&](int64_t i, int64_t c, int k) {
    if constexpr (std::is_same_v<T, typename P::S>)
      __builtin_prefetch(out + i + kPrefetchAhead, 1);  // out is the output row
    const V d = L::load(x + i, c, 0) - shift;
    L::store(out + i, d, c);
    acc[k] += L::keep(L::template exp<true>(d), c);
  });
  return L::hsum(acc);
}

// The forward kernels read rows stored as T and write rows stored as T (y may be x): T == S
// is the in-place RowOps form, T = bf16/f16 widens on load and rounds once on store.
// Softmax (kLog: log-softmax) of x [rows, n] into y [rows, n]. Rows are software-pipelined:
// the max pass over row r + 1 runs between the passes of row r, so its work covers the wait
// for row r's sum and log, and row r + 1's exponentials find their max ready. Each row's
// bits are those of a call on that row alone.
template <class P, class T, bool kLog>
void softmax_rows(const T* x, T* y, typename P::S* buf, int64_t rows, int64_t n, typename P::S* max,
                  typename P::S* log_sum) {
  using L = Lanes<P>;
  using S = typename P::S;
  if (rows <= 0) return;
  S m = row_max<P>(x, n);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    S* b = buf;
    if constexpr (std::is_same_v<T, S>) b = buf ? buf : yr;
    const S sum = kLog ? shifted_exp_sum<P>(xr, m, b, n) : exp_sum<P, true, true>(xr, m, b, n);
    const S ls = std::log(sum);
    const S inv_sum = S(1) / sum;
    const S next_m = r + 1 < rows ? row_max<P>(xr + n, n) : S(0);
    auto output = [&]<bool kNormal>() {
      L::walk(n, [&](int64_t i, int64_t c, int) {
        __builtin_prefetch(yr + i + kPrefetchAhead, 1);
        const typename P::V v = L::load(b + i, c, 0);
        const typename P::V out = kLog ? v - ls : v * inv_sum;
        if constexpr (kNormal)
          L::store_normal(yr + i, out, c);
        else
          L::store(yr + i, out, c);
      });
    };
    // log-softmax: sum >= 1 (or NaN), so ls is 0, NaN or at least 2^-24; in the last two
    // cases no (x - max) - ls is subnormal (a nonzero difference of floats near ls >= 2^-24
    // is at least 2^-48), and the store may skip its check (store_normal).
    if (kLog && ls != 0)
      output.template operator()<true>();
    else
      output.template operator()<false>();
    if (max) max[r] = m;
    if (log_sum) log_sum[r] = ls;
    m = next_m;
  }
}

// p = exp((x - max) - log_sum) for c lanes at x + i (max and log_sum from the forward pass,
// so the argument is <= 0).
template <class P, class T = typename P::S>
typename P::V probs(const T* x, int64_t i, int64_t c, typename P::S max, typename P::S log_sum) {
  using L = Lanes<P>;
  return L::template exp<true>((L::load(x + i, c, 0) - max) - log_sum);
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
    __builtin_prefetch(dx + i + kPrefetchAhead, 1);
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
    __builtin_prefetch(dx + i + kPrefetchAhead, 1);
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
    __builtin_prefetch(y + i + kPrefetchAhead, 1);
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
    __builtin_prefetch(dx + i + kPrefetchAhead, 1);
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
  *log_sum = std::log(exp_sum<P, false, true>(x, m, nullptr, n));
  return (m - static_cast<S>(x[target])) + *log_sum;
}

// dx may be x.
template <class P, class T>
void ce_backward_row(const T* x, T* dx, int64_t n, int64_t target, typename P::S max,
                     typename P::S log_sum, typename P::S scale) {
  using L = Lanes<P>;
  using S = typename P::S;
  // p[target] through the same vector exp as every other element, then minus one.
  const S p_target =
      L::template exp<true>(L::splat((static_cast<S>(x[target]) - max) - log_sum))[0];
  L::walk(n, [&](int64_t i, int64_t c, int) {
    __builtin_prefetch(x + i + kPrefetchAhead);  // the backward pass's first touch of x
    __builtin_prefetch(dx + i + kPrefetchAhead, 1);
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
  return {&softmax_rows<P, T, false>,      &softmax_rows<P, T, true>, &norm_forward_row<P, T>,
          &ce_forward_row<P, T>,           &ce_backward_row<P, T>,    &softmax_backward_row<P, T>,
          &log_softmax_backward_row<P, T>, &norm_backward_row<P, T>};
}

}  // namespace
}  // namespace mixprec::cpu
