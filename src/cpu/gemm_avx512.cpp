// The AVX-512 build of mixprec's own GEMM block product (gemm_own.h): packing that widens as
// it copies, a 12 x 32 FMA micro-kernel, and the shared loop nest (gemm_blocked.h).
#include <immintrin.h>

#include "gemm_own.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (a false -Wmaybe-uninitialized).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "gemm_blocked.h"
#include "gemm_tile_avx512.h"
#include "transpose16.h"

namespace mixprec::cpu::own_gemm {
namespace {

using gemm_panels::first16;
using gemm_panels::TileStore;

// The first `count` (<= 16) elements at p widened to f32, zeros after.
template <DType D>
__m512 load16(const void* p, int64_t count) {
  const __mmask16 m = first16(count);
  if constexpr (D == DType::f32) {
    return _mm512_maskz_loadu_ps(m, p);
  } else if constexpr (D == DType::bf16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  } else {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
}

struct Avx512Kernel {
  static constexpr int64_t kMR = gemm_panels::kMR;  // 12 rows of C per micro-tile
  static constexpr int64_t kNR = gemm_panels::kNR;  // 32 columns: two 16-lane vectors
  // Measured on the transformer shapes (Xeon, 48 KB L1, 2 MB L2) with KC = 384 (its B
  // micro-panel, 384 x 32 f32 = 48 KB, spills from L1 into L2 and still wins):
  // 256 / 240 / 2048 and 512 / 48 / 2048 measured 2-5% slower.
  static constexpr int64_t kMC = 96;    // rows of op(A) per packed block: 144 KB (L2)
  static constexpr int64_t kNC = 1024;  // columns of op(B) per packed block: 1.5 MB

  // op(B)[0:kc, 0:nc] (b already offset) as NR-column micro-panels: dst[q][p][0:NR] =
  // op(B)[p][q * NR + 0:NR], zeros past nc.
  template <DType D>
  static void pack_b(const Block& b, int64_t kc, int64_t nc, float* dst) {
    if (!b.trans) {
      // Row p of op(B) is contiguous: read it whole, front to back, before the next (rows are
      // often 4 KB apart, a stride the hardware prefetchers do not follow panel by panel).
      for (int64_t p = 0; p < kc; ++p) {
        const char* src = element<D>(b, p, 0);
        for (int64_t q = 0; q * kNR < nc; ++q) {
          float* out = dst + q * kc * kNR + p * kNR;
          const int64_t j0 = q * kNR, cols = std::min(kNR, nc - j0);
          _mm512_store_ps(out, load16<D>(src + j0 * kSize<D>, cols));
          _mm512_store_ps(out + 16, load16<D>(src + (j0 + 16) * kSize<D>, cols - 16));
        }
      }
      return;
    }
    for (int64_t q = 0; q * kNR < nc; ++q) {
      float* panel = dst + q * kc * kNR;
      const int64_t j0 = q * kNR;
      // Column j of op(B) is contiguous: 16 x 16 blocks, transposed.
      for (int64_t g = 0; g < 2; ++g) {
        const int64_t jg = j0 + 16 * g, rows = std::clamp<int64_t>(nc - jg, 0, 16);
        for (int64_t p0 = 0; p0 < kc; p0 += 16) {
          const int64_t depth = std::min<int64_t>(16, kc - p0);
          __m512i r[16];
          for (int64_t t = 0; t < 16; ++t)
            r[t] = t < rows ? _mm512_castps_si512(load16<D>(element<D>(b, p0, jg + t), depth))
                            : _mm512_setzero_si512();
          transpose16(r);
          for (int64_t t = 0; t < depth; ++t)
            _mm512_store_si512(panel + (p0 + t) * kNR + 16 * g, r[t]);
        }
      }
    }
  }

  // op(A)[0:mc, 0:kc] (a already offset) as MR-row micro-panels: dst[s][p][0:MR] =
  // op(A)[s * MR + 0:MR][p], zeros past mc.
  template <DType D>
  static void pack_a(const Block& a, int64_t mc, int64_t kc, float* dst) {
    constexpr __mmask16 kPanel = (1u << kMR) - 1;
    if (a.trans) {
      // Column p of op(A) is contiguous: read it whole before the next (as pack_b's rows).
      for (int64_t p = 0; p < kc; ++p) {
        const char* src = element<D>(a, 0, p);
        for (int64_t s = 0; s * kMR < mc; ++s) {
          const int64_t i0 = s * kMR, rows = std::min(kMR, mc - i0);
          _mm512_mask_storeu_ps(dst + s * kc * kMR + p * kMR, kPanel,
                                load16<D>(src + i0 * kSize<D>, rows));
        }
      }
      return;
    }
    for (int64_t s = 0; s * kMR < mc; ++s) {
      float* panel = dst + s * kc * kMR;
      const int64_t i0 = s * kMR, rows = std::min(kMR, mc - i0);
      // Row i of op(A) is contiguous: 16 x 16 blocks (rows past MR zero), transposed.
      for (int64_t p0 = 0; p0 < kc; p0 += 16) {
        const int64_t depth = std::min<int64_t>(16, kc - p0);
        __m512i r[16];
        for (int64_t t = 0; t < 16; ++t)
          r[t] = t < rows ? _mm512_castps_si512(load16<D>(element<D>(a, i0 + t, p0), depth))
                          : _mm512_setzero_si512();
        transpose16(r);
        for (int64_t t = 0; t < depth; ++t)
          _mm512_mask_storeu_ps(panel + (p0 + t) * kMR, kPanel, _mm512_castsi512_ps(r[t]));
      }
    }
  }

  // One micro-tile: the A panel times the B panel, stored as `t` says.
  MIXPREC_PANEL_LOOP static void micro_kernel(int64_t kc, const float* a, const float* b,
                                              const TileStore& t, int64_t rows, int64_t cols) {
    __m512 acc[kMR][2];
    for (int64_t i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    if (t.out == nullptr || (t.beta != 0.0f && t.bias == nullptr))  // c written or read
      gemm_panels::prefetch_c_tile(t.c, t.ldc, rows);
    for (int64_t p = 0; p < kc; ++p) {
      const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
      for (int64_t i = 0; i < kMR; ++i) {
        const __m512 ai = _mm512_set1_ps(a[i]);
        acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
      }
      a += kMR;
      b += kNR;
    }
    gemm_panels::store_tile(acc, t, rows, cols);
  }
};

}  // namespace

void gemm_avx512(int64_t m, int64_t n, int64_t k, float alpha, const Block& a, const Block& b,
                 float beta, float* acc, int64_t ldacc, const GemmEpilogue& epilogue) {
  run_gemm<Avx512Kernel>(m, n, k, alpha, a, b, beta, acc, ldacc, epilogue);
}

}  // namespace mixprec::cpu::own_gemm

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
