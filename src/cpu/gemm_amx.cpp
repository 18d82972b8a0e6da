// AMX-BF16 GEMM blocks: op(B) is packed once per call into VNNI tiles (pairs of K rows
// interleaved), op(A) 32 rows at a time; each 32 x 32 block of C is four accumulator tiles fed
// by two A and two B tiles per 32-wide K step. Only reached after amx::available().
#include <sys/syscall.h>
#include <unistd.h>

#include <cpuid.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <immintrin.h>

#include "gemm_amx.h"
#include "path_switch.h"

namespace mixprec::cpu::amx {
namespace {

constexpr int64_t kRows = 16;               // rows of every tile
constexpr int64_t kK = 32;                  // bf16 per A tile row (= K per step)
constexpr int64_t kN = 16;                  // f32 per C tile row
constexpr int64_t kTileElems = kRows * kK;  // bf16 elements of a packed A or B tile (1 KB)

// MIXPREC_AMX=0 in the environment turns the path off; set_enabled() overrides it.
PathSwitch& path_switch() {
  static PathSwitch s("MIXPREC_AMX");
  return s;
}

bool query_available() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amx_bf16 = (edx >> 22) & 1u, amx_tile = (edx >> 24) & 1u;
  __builtin_cpu_init();  // the packing uses AVX-512BW (every AMX CPU has it)
  if (!amx_bf16 || !amx_tile || !__builtin_cpu_supports("avx512bw")) return false;
  // Linux hands out the 8 KB tile-data state only on request (ARCH_REQ_XCOMP_PERM for
  // XFEATURE_XTILEDATA); without it the first tile instruction faults.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// Packed operand buffers of this thread (kept between calls: fresh ones would page-fault).
uint16_t* scratch(int slot, int64_t n) {
  thread_local std::vector<uint16_t> buffers[2];
  auto& v = buffers[slot];
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace

bool available() {
  static const bool has = query_available();
  return has;
}

void set_enabled(bool enabled) {
  path_switch().set(enabled);
}

bool enabled() {
  return path_switch().on() && available();
}

}  // namespace mixprec::cpu::amx

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw")
// GCC 12's AVX-512 unpack intrinsics start from _mm512_undefined_epi32(), which
// -Wuninitialized flags inside the headers (a GCC false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "amx_tiles.h"
#include "transpose16.h"

namespace mixprec::cpu::amx {
namespace {

// 16 bf16 of row p and 16 of row p + 1 as 16 32-bit pairs (row p in the low half).
__m512i pair_rows(const uint16_t* p0, const uint16_t* p1) {
  const __m512i lo =
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0)));
  const __m512i hi =
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1)));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

// op(A) rows [i0, i0 + 16) as ks tiles: tile s holds row i, column p at [i * 32 + p] =
// op(A)[i0 + i][s * 32 + p], zero beyond m or k.
void pack_a(const uint16_t* a, int64_t lda, bool ta, int64_t m, int64_t k, int64_t i0, int64_t ks,
            uint16_t* dst) {
  const int64_t rows = std::clamp<int64_t>(m - i0, 0, kRows);
  for (int64_t s = 0; s < ks; ++s) {
    uint16_t* t = dst + s * kTileElems;
    const int64_t p0 = s * kK, cols = std::min(kK, k - p0);
    if (ta && rows == kRows && cols == kK) {
      // Stored [k, m]: pairs of K rows give 16 pairs per row i; transposed, row i is the
      // tile row.
      __m512i r[16];
      for (int q = 0; q < 16; ++q)
        r[q] = pair_rows(a + (p0 + 2 * q) * lda + i0, a + (p0 + 2 * q + 1) * lda + i0);
      transpose16(r);
      for (int i = 0; i < 16; ++i) _mm512_storeu_si512(t + i * kK, r[i]);
      continue;
    }
    if (!ta && rows == kRows && cols == kK) {  // 16 rows of 64 bytes: one vector each
      for (int64_t i = 0; i < kRows; ++i)
        _mm512_storeu_si512(t + i * kK, _mm512_loadu_si512(a + (i0 + i) * lda + p0));
      continue;
    }
    if (rows < kRows || cols < kK) std::memset(t, 0, kTileElems * sizeof(uint16_t));
    if (!ta) {
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(t + i * kK, a + (i0 + i) * lda + p0, static_cast<size_t>(cols) * 2);
    } else {
      for (int64_t p = 0; p < cols; ++p) {
        const uint16_t* src = a + (p0 + p) * lda + i0;
        for (int64_t i = 0; i < rows; ++i) t[i * kK + p] = src[i];
      }
    }
  }
}

// op(B) columns [j0, j0 + 16) as ks VNNI tiles: tile s holds, at row r, [2c + e] =
// op(B)[s * 32 + 2r + e][j0 + c], zero beyond k or n.
void pack_b(const uint16_t* b, int64_t ldb, bool tb, int64_t n, int64_t k, int64_t j0, int64_t ks,
            uint16_t* dst) {
  const int64_t cols = std::clamp<int64_t>(n - j0, 0, kN);
  for (int64_t s = 0; s < ks; ++s) {
    uint16_t* t = dst + s * kTileElems;
    const int64_t p0 = s * kK, depth = std::min(kK, k - p0);
    if (cols == kN && depth == kK) {
      if (tb) {  // row c of b holds column c's 16 K pairs: a 32-bit transpose
        __m512i r[16];
        for (int c = 0; c < 16; ++c) r[c] = _mm512_loadu_si512(b + (j0 + c) * ldb + p0);
        transpose16(r);
        for (int q = 0; q < 16; ++q) _mm512_storeu_si512(t + q * kK, r[q]);
      } else {  // rows 2r and 2r + 1 of b interleaved
        for (int q = 0; q < 16; ++q)
          _mm512_storeu_si512(
              t + q * kK, pair_rows(b + (p0 + 2 * q) * ldb + j0, b + (p0 + 2 * q + 1) * ldb + j0));
      }
      continue;
    }
    std::memset(t, 0, kTileElems * sizeof(uint16_t));
    if (tb) {  // column j of op(B) is row j of b: its K pairs are consecutive
      for (int64_t c = 0; c < cols; ++c) {
        const uint16_t* src = b + (j0 + c) * ldb + p0;
        for (int64_t p = 0; p < depth; ++p) t[(p / 2) * kK + 2 * c + (p & 1)] = src[p];
      }
    } else {  // rows p and p + 1 of b interleaved
      for (int64_t p = 0; p < depth; ++p) {
        const uint16_t* src = b + (p0 + p) * ldb + j0;
        uint16_t* row = t + (p / 2) * kK + (p & 1);
        for (int64_t c = 0; c < cols; ++c) row[2 * c] = src[c];
      }
    }
  }
}

// acc block [rows x cols] = alpha * product + beta * acc (beta == 0: not read).
void store_block(const float* product, int64_t ldp, int64_t rows, int64_t cols, float alpha,
                 float beta, float* acc, int64_t ldacc) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* pr = product + i * ldp;
    float* ar = acc + i * ldacc;
    if (beta == 0.0f)
      for (int64_t j = 0; j < cols; ++j) ar[j] = alpha * pr[j];
    else
      for (int64_t j = 0; j < cols; ++j) ar[j] = alpha * pr[j] + beta * ar[j];
  }
}

}  // namespace

void gemm_bf16(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
               bool ta, const uint16_t* b, int64_t ldb, bool tb, float beta, float* acc,
               int64_t ldacc) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  const int64_t ks = (k + kK - 1) / kK;
  const int64_t mpairs = (m + 2 * kRows - 1) / (2 * kRows);  // 32-row blocks of C
  const int64_t npairs = (n + 2 * kN - 1) / (2 * kN);        // 32-column blocks of C
  // All of op(B), column tiles in pairs: [2 * npairs][ks] tiles.
  uint16_t* bp = scratch(1, 2 * npairs * ks * kTileElems);
  for (int64_t jt = 0; jt < 2 * npairs; ++jt)
    pack_b(b, ldb, tb, n, k, jt * kN, ks, bp + jt * ks * kTileElems);
  uint16_t* ap = scratch(0, 2 * ks * kTileElems);  // two A row tiles: [2][ks]
  alignas(64) float product[2 * kRows * 2 * kN];   // one 32 x 32 block of C
  constexpr int64_t kLdp = 2 * kN;
  // Tiles 0-3: C accumulators (16 x 16 f32); 4, 5: A (16 x 32 bf16); 6, 7: B (16 pairs x 16).
  configure_full_tiles();
  for (int64_t mi = 0; mi < mpairs; ++mi) {
    const int64_t i0 = mi * 2 * kRows;
    pack_a(a, lda, ta, m, k, i0, ks, ap);
    pack_a(a, lda, ta, m, k, i0 + kRows, ks, ap + ks * kTileElems);
    for (int64_t nj = 0; nj < npairs; ++nj) {
      const uint16_t* b0 = bp + (2 * nj) * ks * kTileElems;
      const uint16_t* b1 = b0 + ks * kTileElems;
      const uint16_t* a0 = ap;
      const uint16_t* a1 = ap + ks * kTileElems;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t s = 0; s < ks; ++s) {
        _tile_loadd(4, a0 + s * kTileElems, 64);
        _tile_loadd(5, a1 + s * kTileElems, 64);
        _tile_loadd(6, b0 + s * kTileElems, 64);
        _tile_loadd(7, b1 + s * kTileElems, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, product, kLdp * 4);
      _tile_stored(1, product + kN, kLdp * 4);
      _tile_stored(2, product + kRows * kLdp, kLdp * 4);
      _tile_stored(3, product + kRows * kLdp + kN, kLdp * 4);
      const int64_t j0 = nj * 2 * kN;
      store_block(product, kLdp, std::min(2 * kRows, m - i0), std::min(2 * kN, n - j0), alpha, beta,
                  acc + i0 * ldacc + j0, ldacc);
    }
  }
  _tile_release();
}

}  // namespace mixprec::cpu::amx

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
