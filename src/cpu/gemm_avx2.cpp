// The AVX2 build of mixprec's own GEMM block product (gemm_own.h), for CPUs without AVX-512
// (Zen 2 and 3, Haswell to Comet Lake): packing that widens as it copies, a 6 x 16 FMA
// micro-kernel (12 accumulators, two B vectors and a broadcast: 15 of the 16 registers), and
// the shared loop nest (gemm_blocked.h). Same sums in the same order as the AVX-512 build.
#include <immintrin.h>

#include <cstring>

#include "gemm_own.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "gemm_blocked.h"

namespace mixprec::cpu::own_gemm {
namespace {

using gemm_panels::TileStore;

// Eight elements at p widened to f32.
template <DType D>
__m256 widen8(const void* p) {
  if constexpr (D == DType::f32) {
    return _mm256_loadu_ps(static_cast<const float*>(p));
  } else {
    const __m128i h = _mm_loadu_si128(static_cast<const __m128i*>(p));
    if constexpr (D == DType::bf16)
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else
      return _mm256_cvtph_ps(h);
  }
}

// The first `count` (<= 8) elements at p widened to f32, zeros after; nothing past them is
// read (AVX2 has no 16-bit masked load: a short tail goes through a zeroed copy).
template <DType D>
__m256 load8(const void* p, int64_t count) {
  if (count >= 8) return widen8<D>(p);
  alignas(32) unsigned char tail[32] = {};
  if (count > 0) std::memcpy(tail, p, static_cast<size_t>(count * kSize<D>));
  return widen8<D>(tail);
}

// Lanes [0, count) of v to dst.
void store8(float* dst, __m256 v, int64_t count) {
  if (count >= 8) return _mm256_storeu_ps(dst, v);
  if (count <= 0) return;
  alignas(32) float tail[8];
  _mm256_store_ps(tail, v);
  std::memcpy(dst, tail, static_cast<size_t>(count) * sizeof(float));
}

// Lanes [0, count) of v rounded to bf16 (f16 when `f16`) at dst: the AVX-512 epilogue's bits
// (nearest even; a NaN kept quiet with its top payload).
void store8_narrow(uint16_t* dst, __m256 v, int64_t count, bool f16) {
  if (count <= 0) return;
  __m128i h;
  if (f16) {
    h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {
    const __m256i b = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7FFF)), odd), 16);
    // |b| > infinity as signed 32-bit integers (both non-negative): a NaN.
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF)),
                                           _mm256_set1_epi32(0x7F800000));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, quiet, nan);
    // 32 -> 16 bits (every value fits): lanes 0-3 and 4-7 sit in the two 64-bit halves 0, 2.
    h = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
  }
  if (count >= 8) return _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), h);
  alignas(16) uint16_t tail[8];
  _mm_store_si128(reinterpret_cast<__m128i*>(tail), h);
  std::memcpy(dst, tail, static_cast<size_t>(count) * sizeof(uint16_t));
}

// Rows become columns: r[i][j] <- r[j][i].
void transpose8(__m256 (&r)[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) {  // rows 0-3, then 4-7
    s[h + 0] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
  }
}

struct Avx2Kernel {
  static constexpr int64_t kMR = 6;   // rows of C per micro-tile
  static constexpr int64_t kNR = 16;  // columns: two 8-lane vectors
  // op(A) block 96 x 384 f32 = 144 KB (L2 is 512 KB on Zen 3, 256 KB on Skylake client);
  // op(B) block 384 x 1024 = 1.5 MB; a B micro-panel 384 x 16 = 24 KB (L1: 32 KB).
  static constexpr int64_t kMC = 96;
  static constexpr int64_t kNC = 1024;

  // Lanes 0-5 of v at dst (a 6-row A panel's column).
  static void store6(float* dst, __m256 v) {
    _mm_storeu_ps(dst, _mm256_castps256_ps128(v));
    _mm_storel_pi(reinterpret_cast<__m64*>(dst + 4), _mm256_extractf128_ps(v, 1));
  }

  // op(B)[0:kc, 0:nc] as NR-column micro-panels: dst[q][p][0:NR] = op(B)[p][q * NR + 0:NR],
  // zeros past nc.
  template <DType D>
  static void pack_b(const Block& b, int64_t kc, int64_t nc, float* dst) {
    if (!b.trans) {
      // Row p of op(B) is contiguous: read it whole, front to back, before the next.
      for (int64_t p = 0; p < kc; ++p) {
        const char* src = element<D>(b, p, 0);
        for (int64_t q = 0; q * kNR < nc; ++q) {
          float* out = dst + q * kc * kNR + p * kNR;
          const int64_t j0 = q * kNR, cols = std::min(kNR, nc - j0);
          _mm256_store_ps(out, load8<D>(src + j0 * kSize<D>, cols));
          _mm256_store_ps(out + 8, load8<D>(src + (j0 + 8) * kSize<D>, cols - 8));
        }
      }
      return;
    }
    for (int64_t q = 0; q * kNR < nc; ++q) {
      float* panel = dst + q * kc * kNR;
      // Column j of op(B) is contiguous: 8 x 8 blocks, transposed.
      for (int64_t g = 0; g < 2; ++g) {
        const int64_t jg = q * kNR + 8 * g, cols = std::clamp<int64_t>(nc - jg, 0, 8);
        for (int64_t p0 = 0; p0 < kc; p0 += 8) {
          const int64_t depth = std::min<int64_t>(8, kc - p0);
          __m256 r[8];
          for (int64_t t = 0; t < 8; ++t)
            r[t] = t < cols ? load8<D>(element<D>(b, p0, jg + t), depth) : _mm256_setzero_ps();
          transpose8(r);
          for (int64_t t = 0; t < depth; ++t) _mm256_store_ps(panel + (p0 + t) * kNR + 8 * g, r[t]);
        }
      }
    }
  }

  // op(A)[0:mc, 0:kc] as MR-row micro-panels: dst[s][p][0:MR] = op(A)[s * MR + 0:MR][p],
  // zeros past mc.
  template <DType D>
  static void pack_a(const Block& a, int64_t mc, int64_t kc, float* dst) {
    if (a.trans) {
      // Column p of op(A) is contiguous: read it whole before the next. Eight lanes are read
      // where the block has them and six kept (the next panel's two are read again there).
      for (int64_t p = 0; p < kc; ++p) {
        const char* src = element<D>(a, 0, p);
        for (int64_t s = 0; s * kMR < mc; ++s) {
          const int64_t i0 = s * kMR;
          store6(dst + s * kc * kMR + p * kMR, load8<D>(src + i0 * kSize<D>, mc - i0));
        }
      }
      return;
    }
    for (int64_t s = 0; s * kMR < mc; ++s) {
      float* panel = dst + s * kc * kMR;
      const int64_t i0 = s * kMR, rows = std::min(kMR, mc - i0);
      // Row i of op(A) is contiguous: 8 x 8 blocks (rows past MR zero), transposed.
      for (int64_t p0 = 0; p0 < kc; p0 += 8) {
        const int64_t depth = std::min<int64_t>(8, kc - p0);
        __m256 r[8];
        for (int64_t t = 0; t < 8; ++t)
          r[t] = t < rows ? load8<D>(element<D>(a, i0 + t, p0), depth) : _mm256_setzero_ps();
        transpose8(r);
        for (int64_t t = 0; t < depth; ++t) store6(panel + (p0 + t) * kMR, r[t]);
      }
    }
  }

  // The micro-tile's sums to where `t` says (gemm_panels::TileStore): alpha·s, plus the bias or
  // beta·c, rounded once, as the AVX-512 build stores them.
  MIXPREC_CHECKED_STORE static void store_tile(const __m256 (&acc)[kMR][2], const TileStore& t,
                                               int64_t rows, int64_t cols) {
    const __m256 va = _mm256_set1_ps(t.alpha), vb = _mm256_set1_ps(t.beta);
    __m256 bias0 = _mm256_setzero_ps(), bias1 = _mm256_setzero_ps();
    if (t.bias != nullptr) {
      bias0 = load8<DType::f32>(t.bias, cols);
      bias1 = load8<DType::f32>(t.bias + 8, cols - 8);
    }
    for (int64_t i = 0; i < rows; ++i) {
      __m256 r0 = _mm256_mul_ps(va, acc[i][0]), r1 = _mm256_mul_ps(va, acc[i][1]);
      if (t.bias != nullptr) {
        r0 = _mm256_add_ps(bias0, r0);
        r1 = _mm256_add_ps(bias1, r1);
      } else if (t.beta != 0.0f) {
        const float* row = t.c + i * t.ldc;
        r0 = _mm256_fmadd_ps(vb, load8<DType::f32>(row, cols), r0);
        r1 = _mm256_fmadd_ps(vb, load8<DType::f32>(row + 8, cols - 8), r1);
      }
      if (t.out != nullptr) {
        uint16_t* row = t.out + i * t.ldout;
        store8_narrow(row, r0, cols, t.out_f16);
        store8_narrow(row + 8, r1, cols - 8, t.out_f16);
      } else {
        float* row = t.c + i * t.ldc;
        store8(row, r0, cols);
        store8(row + 8, r1, cols - 8);
      }
    }
  }

  MIXPREC_PANEL_LOOP static void micro_kernel(int64_t kc, const float* a, const float* b,
                                              const TileStore& t, int64_t rows, int64_t cols) {
    __m256 acc[kMR][2];
    for (int64_t i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    if (t.out == nullptr || (t.beta != 0.0f && t.bias == nullptr))  // c written or read
      gemm_panels::prefetch_c_tile(t.c, t.ldc, rows);
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; ++p) {
      const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
      for (int64_t i = 0; i < kMR; ++i) {
        const __m256 ai = _mm256_broadcast_ss(a + i);
        acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
      }
      a += kMR;
      b += kNR;
    }
    // A copy leaves the store: taking acc's address there kept GCC 12 writing the accumulators
    // to the stack at every step of the loop (a third of the speed).
    __m256 sums[kMR][2];
    for (int64_t i = 0; i < kMR; ++i) sums[i][0] = acc[i][0], sums[i][1] = acc[i][1];
    store_tile(sums, t, rows, cols);
  }
};

}  // namespace

void gemm_avx2(int64_t m, int64_t n, int64_t k, float alpha, const Block& a, const Block& b,
               float beta, float* acc, int64_t ldacc, const GemmEpilogue& epilogue) {
  run_gemm<Avx2Kernel>(m, n, k, alpha, a, b, beta, acc, ldacc, epilogue);
}

}  // namespace mixprec::cpu::own_gemm

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
