// Dropout: element i is kept iff philox_u32(seed, stream, i) >= floor(p·2^32), so the mask is a
// pure function of (seed, stream, i): thread count and block boundaries never change it, and
// backward regenerates it instead of storing it. Philox runs on L blocks (4·L elements) at a
// time in vector registers (GCC vector extensions), built for SSE2 (L = 4), AVX2 (8) and
// AVX-512F (16); all integer work, so every build gives the same bits.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include <immintrin.h>

#include "../numerics/vector_lanes.h"
#include "mixprec/cpu/activation.h"
#include "mixprec/cpu/elementwise.h"
#include "mixprec/numerics/philox.h"

#pragma GCC diagnostic ignored "-Wpsabi"  // vector helpers are always inlined

namespace mixprec::cpu {
namespace {

using simd::Lanes;

// 64-bit products of the even uint32 lanes of a with k (pmuludq: generic vector code would
// expand a 64-bit multiply). Not always_inline: the AVX ones inline into the flattened
// builds below, which carry the target.
MIXPREC_INLINE Lanes<4>::vu64 mul_even(const Lanes<4>::vu64& a, uint32_t k) {
  return reinterpret_cast<Lanes<4>::vu64>(
      _mm_mul_epu32(reinterpret_cast<__m128i>(a), reinterpret_cast<__m128i>(Lanes<4>::vu{} + k)));
}
[[gnu::target("avx2")]] inline Lanes<8>::vu64 mul_even(const Lanes<8>::vu64& a, uint32_t k) {
  return reinterpret_cast<Lanes<8>::vu64>(_mm256_mul_epu32(
      reinterpret_cast<__m256i>(a), reinterpret_cast<__m256i>(Lanes<8>::vu{} + k)));
}
[[gnu::target("avx512f")]] inline Lanes<16>::vu64 mul_even(const Lanes<16>::vu64& a, uint32_t k) {
  // The builtin with an explicit zero pass-through (_mm512_mul_epu32 trips
  // -Wmaybe-uninitialized in GCC 12's header).
  using v16si = int __attribute__((vector_size(64)));
  using v8di = long long __attribute__((vector_size(64)));
  return reinterpret_cast<Lanes<16>::vu64>(__builtin_ia32_pmuludq512_mask(
      reinterpret_cast<v16si>(a), reinterpret_cast<v16si>(Lanes<16>::vu{} + k), v8di{},
      static_cast<unsigned char>(0xFF)));
}

// Lane-wise interleave of the low (kHigh = 0) or high halves of a and b: a0 b0 a1 b1 ...
template <int kHigh, class V, std::size_t... I>
MIXPREC_INLINE V zip(const V& a, const V& b, std::index_sequence<I...>) {
  constexpr std::size_t n = sizeof...(I), base = kHigh * n / 2;
  return __builtin_shufflevector(a, b, (I % 2 == 0 ? base + I / 2 : n + base + I / 2)...);
}

// Philox4x32-10 on L blocks at once, lane j holding block block0 + j (as philox4x32_10 in
// philox.h), then the words put in element order: out[4j + w] = word w of block block0 + j.
template <int L>
MIXPREC_INLINE void philox_words(uint64_t seed, uint64_t stream, uint64_t block0,
                                 typename Lanes<L>::vu* out) {
  using vu = typename Lanes<L>::vu;
  using vu64 = typename Lanes<L>::vu64;
  vu iota;
  for (int j = 0; j < L; ++j) iota[j] = static_cast<uint32_t>(j);
  vu c0 = iota + static_cast<uint32_t>(block0);
  vu c1 = (vu{} + static_cast<uint32_t>(block0 >> 32)) -
          reinterpret_cast<vu>(c0 < static_cast<uint32_t>(block0));  // carry: minus -1
  vu c2 = vu{} + static_cast<uint32_t>(stream), c3 = vu{} + static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  constexpr uint64_t kHighWords = 0xFFFFFFFF00000000u;
  for (int round = 0; round < 10; ++round) {
    const vu64 p0e = mul_even(reinterpret_cast<vu64>(c0), 0xD2511F53u);
    const vu64 p0o = mul_even(reinterpret_cast<vu64>(c0) >> 32, 0xD2511F53u);
    const vu64 p1e = mul_even(reinterpret_cast<vu64>(c2), 0xCD9E8D57u);
    const vu64 p1o = mul_even(reinterpret_cast<vu64>(c2) >> 32, 0xCD9E8D57u);
    const vu hi0 = reinterpret_cast<vu>((p0e >> 32) | (p0o & kHighWords));
    const vu hi1 = reinterpret_cast<vu>((p1e >> 32) | (p1o & kHighWords));
    const vu lo0 = c0 * 0xD2511F53u, lo1 = c2 * 0xCD9E8D57u;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Transpose [4 words][L blocks] -> [L blocks][4 words]: zip words 0/1 and 2/3 as 32-bit
  // lanes, then those pairs as 64-bit lanes.
  const auto seq = std::make_index_sequence<L>{};
  const auto seq64 = std::make_index_sequence<L / 2>{};
  const vu w01[2] = {zip<0>(c0, c1, seq), zip<1>(c0, c1, seq)};
  const vu w23[2] = {zip<0>(c2, c3, seq), zip<1>(c2, c3, seq)};
  for (int h = 0; h < 2; ++h) {
    const vu64 a = reinterpret_cast<vu64>(w01[h]), b = reinterpret_cast<vu64>(w23[h]);
    out[2 * h] = reinterpret_cast<vu>(zip<0>(a, b, seq64));
    out[2 * h + 1] = reinterpret_cast<vu>(zip<1>(a, b, seq64));
  }
}

// y = x·mask/(1-p) over one map_flat block; `first` (a multiple of 4) is the index of x[0].
template <int L>
MIXPREC_INLINE void dropout_run(const float* x, float* y, int64_t n, uint64_t first, uint64_t seed,
                                uint64_t stream, uint32_t threshold, float scale) {
  using vu = typename Lanes<L>::vu;
  using vf = typename Lanes<L>::vf;
  const vu scale_bits = vu{} + std::bit_cast<uint32_t>(scale);
  vu words[4];  // Philox words of 4·L elements, in element order: [4][L]
  for (int64_t i = 0; i < n; i += 4 * L) {  // 4·L elements: L Philox blocks
    philox_words<L>(seed, stream, (first + static_cast<uint64_t>(i)) / 4, words);
    for (int v = 0; v < 4; ++v) {
      const int64_t at = i + v * L, len = std::min<int64_t>(L, n - at);
      if (len <= 0) break;
      // factor = scale where kept, +0 where dropped; x·factor keeps NaN a NaN, as torch does.
      const vf factor =
          reinterpret_cast<vf>(reinterpret_cast<vu>(words[v] >= threshold) & scale_bits);
      vf xv{};
      if (len == L) {  // fixed-size copies compile to vector loads and stores
        std::memcpy(&xv, x + at, sizeof(vf));
        const vf yv = xv * factor;
        std::memcpy(y + at, &yv, sizeof(vf));
      } else {
        const auto bytes = static_cast<std::size_t>(len) * sizeof(float);
        std::memcpy(&xv, x + at, bytes);
        const vf yv = xv * factor;
        std::memcpy(y + at, &yv, bytes);
      }
    }
  }
}

using DropoutFn = void (*)(const float*, float*, int64_t, uint64_t, uint64_t, uint64_t, uint32_t,
                           float);
void dropout_baseline(const float* x, float* y, int64_t n, uint64_t first, uint64_t seed,
                      uint64_t stream, uint32_t threshold, float scale) {
  dropout_run<4>(x, y, n, first, seed, stream, threshold, scale);
}
[[gnu::target("avx2"), gnu::flatten]] void dropout_avx2(const float* x, float* y, int64_t n,
                                                        uint64_t first, uint64_t seed,
                                                        uint64_t stream, uint32_t threshold,
                                                        float scale) {
  dropout_run<8>(x, y, n, first, seed, stream, threshold, scale);
}
[[gnu::target("avx512f"), gnu::flatten]] void dropout_avx512(const float* x, float* y, int64_t n,
                                                             uint64_t first, uint64_t seed,
                                                             uint64_t stream, uint32_t threshold,
                                                             float scale) {
  dropout_run<16>(x, y, n, first, seed, stream, threshold, scale);
}

void check_p(const char* op, double p) {
  MIXPREC_CHECK(p >= 0.0 && p < 1.0, op, "p must be in [0, 1), got " + std::to_string(p));
}

// out = in·mask/(1-p), in and out n contiguous elements.
void apply_mask(const Tensor& in, Tensor& out, double p, uint64_t seed, uint64_t stream, Isa isa) {
  const uint32_t threshold = dropout_threshold(p);
  const int64_t n = in.numel();
  const std::array<MapIn, 1> src{{{in.dtype(), in.raw_data()}}};
  const std::array<MapOut, 1> dst{{{out.dtype(), out.raw_data()}}};
  if (in.dtype() == DType::f64 || out.dtype() == DType::f64) {
    const double scale = 1.0 / (1.0 - p);
    map_flat<double>(n, src, dst,
                     [&](const double* const* x, double* const* y, int64_t len, int64_t first) {
                       for (int64_t i = 0; i < len; ++i) {
                         const auto e = static_cast<uint64_t>(first + i);
                         const bool keep = philox_u32(seed, stream, e) >= threshold;
                         y[0][i] = x[0][i] * (keep ? scale : 0.0);
                       }
                     });
  } else {
    const auto scale = static_cast<float>(1.0 / (1.0 - p));
    const VecIsa vi = vec_isa(isa);
    const DropoutFn run = vi == VecIsa::avx512 ? dropout_avx512
                          : vi == VecIsa::avx2 ? dropout_avx2
                                               : dropout_baseline;
    map_flat<float>(
        n, src, dst, [&](const float* const* x, float* const* y, int64_t len, int64_t first) {
          run(x[0], y[0], len, static_cast<uint64_t>(first), seed, stream, threshold, scale);
        });
  }
}

}  // namespace

uint32_t dropout_threshold(double p) {
  check_p("dropout", p);
  return static_cast<uint32_t>(std::floor(p * 0x1p32));  // < 2^32 since p < 1
}

Tensor dropout_forward(const Tensor& x_in, double p, uint64_t seed, uint64_t stream, Isa isa) {
  check_p("dropout", p);
  check_floating("dropout", x_in, "input");
  check_compute_dtype("dropout", x_in.dtype());
  const Tensor x = kernel_input(x_in);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  apply_mask(x, y, p, seed, stream, isa);
  return y;
}

Tensor dropout_backward(const Tensor& g_in, double p, uint64_t seed, uint64_t stream,
                        DType out_dtype, Isa isa) {
  check_p("dropout backward", p);
  check_floating("dropout backward", g_in, "gradient");
  check_compute_dtype("dropout backward", out_dtype);
  const Tensor g = kernel_input(g_in);
  Tensor dx = Tensor::empty(g.shape(), out_dtype);
  apply_mask(g, dx, p, seed, stream, isa);
  return dx;
}

}  // namespace mixprec::cpu
