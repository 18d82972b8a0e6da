// The AVX512-BF16 GEMM block product (gemm_avx512_bf16.h): packing into K-pair panels, a
// 12 x 32 VDPBF16PS micro-kernel, and the BLIS loop nest around them (NC columns of op(B),
// a KC x 32 micro-panel of it in L1, MC x KC of op(A) in L2).
#include "gemm_avx512_bf16.h"

#include <algorithm>

#include <immintrin.h>

#include "path_switch.h"

namespace mixprec::cpu::avx512_bf16_gemm {
namespace {

// MIXPREC_AVX512_BF16=0 in the environment turns the path off; set_enabled() overrides it.
PathSwitch& path_switch() {
  static PathSwitch s("MIXPREC_AVX512_BF16");
  return s;
}

}  // namespace

bool available() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return has;
}

void set_enabled(bool enabled) {
  path_switch().set(enabled);
}

bool enabled() {
  return path_switch().on() && available();
}

}  // namespace mixprec::cpu::avx512_bf16_gemm

#if defined(__clang__)
#pragma clang attribute push( \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (a false -Wmaybe-uninitialized).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "gemm_tile_avx512.h"
#include "transpose16.h"

namespace mixprec::cpu::avx512_bf16_gemm {
namespace {

using gemm_panels::first16;
using gemm_panels::kMR;
using gemm_panels::kNR;
using gemm_panels::round_up;

// Block sizes (Zen 5, 48 KB L1, 1 MB L2): KC 512, 768 and 1024 measured within the noise on the
// transformer shapes (±5%); 768 keeps a d_model-768 K in one block (one C pass).
constexpr int64_t kKC = kBlockK;
constexpr int64_t kMC = 96;    // rows of op(A) per packed block: 144 KB (L2)
constexpr int64_t kNC = 1024;  // columns of op(B) per packed block: 1.5 MB

// The first `count` of 32 lanes.
__mmask32 first32(int64_t count) {
  return count >= 32 ? ~__mmask32(0) : count <= 0 ? __mmask32(0) : __mmask32((1u << count) - 1);
}

// Up to 16 bf16 at p0 and at p1 (null: zeros) as 16 K-pairs, p0's in the low halves.
__m512i pair_up(const uint16_t* p0, const uint16_t* p1, int64_t count) {
  const __mmask16 m = first16(count);
  const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p0));
  if (p1 == nullptr) return lo;
  const __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p1));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

// Up to 32 bf16 at p (16 K-pairs of one row), zeros after `count`.
__m512i load_pairs(const uint16_t* p, int64_t count) {
  return _mm512_maskz_loadu_epi16(first32(count), p);
}

// The packing routines stay out of line (one call per block) so that profiles show them.

// op(B)[0:kc, 0:nc] (b at op(B)[0][0]) as NR-column micro-panels of K-pairs:
// dst[q][r][c] = op(B)[2r][q·NR + c] | op(B)[2r + 1][q·NR + c] << 16, zeros past kc and nc.
[[gnu::noinline]] void pack_b(const uint16_t* b, int64_t ldb, bool tb, int64_t kc, int64_t nc,
                              uint32_t* dst) {
  const int64_t pairs = (kc + 1) / 2;
  if (!tb) {
    // Rows of op(B) are contiguous: two at a time, front to back.
    for (int64_t r = 0; r < pairs; ++r) {
      const uint16_t* row0 = b + 2 * r * ldb;
      const uint16_t* row1 = 2 * r + 1 < kc ? row0 + ldb : nullptr;
      for (int64_t q = 0; q * kNR < nc; ++q) {
        uint32_t* out = dst + (q * pairs + r) * kNR;
        const int64_t j0 = q * kNR;
        for (int64_t g = 0; g < 2; ++g) {
          const int64_t j = j0 + 16 * g;
          _mm512_store_si512(out + 16 * g, pair_up(row0 + j, row1 ? row1 + j : nullptr, nc - j));
        }
      }
    }
    return;
  }
  // Column j of op(B) is row j of b: its K-pairs are consecutive 32-bit words, so 16 columns
  // of 16 pairs are a 16 x 16 transpose.
  for (int64_t q = 0; q * kNR < nc; ++q) {
    uint32_t* panel = dst + q * pairs * kNR;
    for (int64_t g = 0; g < 2; ++g) {
      const int64_t jg = q * kNR + 16 * g, cols = std::clamp<int64_t>(nc - jg, 0, 16);
      for (int64_t r0 = 0; r0 < pairs; r0 += 16) {
        __m512i r[16];
        for (int64_t t = 0; t < 16; ++t)
          r[t] = t < cols ? load_pairs(b + (jg + t) * ldb + 2 * r0, kc - 2 * r0)
                          : _mm512_setzero_si512();
        transpose16(r);
        for (int64_t t = 0; t < std::min<int64_t>(16, pairs - r0); ++t)
          _mm512_store_si512(panel + (r0 + t) * kNR + 16 * g, r[t]);
      }
    }
  }
}

// op(A)[0:mc, 0:kc] (a at op(A)[0][0]) as MR-row micro-panels of K-pairs:
// dst[s][r][i] = op(A)[s·MR + i][2r] | op(A)[s·MR + i][2r + 1] << 16, zeros past mc and kc.
[[gnu::noinline]] void pack_a(const uint16_t* a, int64_t lda, bool ta, int64_t mc, int64_t kc,
                              uint32_t* dst) {
  constexpr __mmask16 kPanel = (1u << kMR) - 1;
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t s = 0; s * kMR < mc; ++s) {
    uint32_t* panel = dst + s * pairs * kMR;
    const int64_t i0 = s * kMR, rows = std::min(kMR, mc - i0);
    if (ta) {  // column p of op(A) is contiguous: two at a time
      for (int64_t r = 0; r < pairs; ++r) {
        const uint16_t* col0 = a + 2 * r * lda + i0;
        const uint16_t* col1 = 2 * r + 1 < kc ? col0 + lda : nullptr;
        _mm512_mask_storeu_epi32(panel + r * kMR, kPanel, pair_up(col0, col1, rows));
      }
      continue;
    }
    // Row i of op(A) is contiguous: 16 rows (those past MR zero) of 16 pairs, transposed.
    for (int64_t r0 = 0; r0 < pairs; r0 += 16) {
      __m512i r[16];
      for (int64_t t = 0; t < 16; ++t)
        r[t] = t < rows ? load_pairs(a + (i0 + t) * lda + 2 * r0, kc - 2 * r0)
                        : _mm512_setzero_si512();
      transpose16(r);
      for (int64_t t = 0; t < std::min<int64_t>(16, pairs - r0); ++t)
        _mm512_mask_storeu_epi32(panel + (r0 + t) * kMR, kPanel, r[t]);
    }
  }
}

__m512bh as_bf16_pairs(__m512i v) {
  return reinterpret_cast<__m512bh&>(v);
}

// One micro-tile: the A panel times the B panel, stored as `t` says.
MIXPREC_PANEL_LOOP void micro_kernel(int64_t pairs, const uint32_t* a, const uint32_t* b,
                                     const gemm_panels::TileStore& t, int64_t rows, int64_t cols) {
  __m512 acc[kMR][2];
  for (int64_t i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  if (t.out == nullptr || (t.beta != 0.0f && t.bias == nullptr))  // c written or read
    gemm_panels::prefetch_c_tile(t.c, t.ldc, rows);
  for (int64_t r = 0; r < pairs; ++r) {
    const __m512bh b0 = as_bf16_pairs(_mm512_load_si512(b));
    const __m512bh b1 = as_bf16_pairs(_mm512_load_si512(b + 16));
#pragma GCC unroll 12
    for (int64_t i = 0; i < kMR; ++i) {
      const __m512bh ai = as_bf16_pairs(_mm512_set1_epi32(static_cast<int>(a[i])));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
    a += kMR;
    b += kNR;
  }
  gemm_panels::store_tile(acc, t, rows, cols);
}

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda, bool ta,
          const uint16_t* b, int64_t ldb, bool tb, float beta, float* acc, int64_t ldacc,
          const GemmEpilogue* epilogue) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  const GemmEpilogue none{};
  const GemmEpilogue& ep = epilogue != nullptr ? *epilogue : none;
  const int64_t max_pairs = (std::min(k, kKC) + 1) / 2;
  auto* bp = static_cast<uint32_t*>(gemm_panels::thread_buffer(
      1, sizeof(uint32_t) * max_pairs * round_up(std::min(n, kNC), kNR)));
  auto* ap = static_cast<uint32_t*>(gemm_panels::thread_buffer(
      0, sizeof(uint32_t) * round_up(std::min(m, kMC), kMR) * max_pairs));
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc), pairs = (kc + 1) / 2;
      pack_b(tb ? b + jc * ldb + pc : b + pc * ldb + jc, ldb, tb, kc, nc, bp);
      const bool first = pc == 0, last = pc + kc >= k;
      for (int64_t ic = 0; ic < m; ic += kMC) {
        const int64_t mc = std::min(kMC, m - ic);
        pack_a(ta ? a + pc * lda + ic : a + ic * lda + pc, lda, ta, mc, kc, ap);
        for (int64_t jr = 0; jr < nc; jr += kNR)
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const gemm_panels::TileStore t =
                gemm_panels::tile_store(acc, ldacc, alpha, beta, ep, ic + ir, jc + jr, first, last);
            micro_kernel(pairs, ap + ir * pairs, bp + jr * pairs, t, std::min(kMR, mc - ir),
                         std::min(kNR, nc - jr));
          }
      }
    }
  }
}

}  // namespace mixprec::cpu::avx512_bf16_gemm

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
