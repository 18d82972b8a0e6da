// The loop nest of mixprec's own GEMM block product (gemm_own.h), shared by its builds: NC
// columns of op(B) packed for L3, KC-blocks of K, MC rows of op(A) packed for L2, and
// micro-tiles of MR x NR over them. Each build (gemm_avx512.cpp, gemm_avx2.cpp) includes it
// under its own target options with a `Kernel` of its own:
//   static constexpr int64_t kMR, kNR, kMC, kNC;   // micro-tile and block sizes
//   template <DType D> static void pack_a(const Block&, int64_t mc, int64_t kc, float* dst);
//   template <DType D> static void pack_b(const Block&, int64_t kc, int64_t nc, float* dst);
//   static void micro_kernel(int64_t kc, const float* a, const float* b,
//                            const gemm_panels::TileStore&, int64_t rows, int64_t cols);
#pragma once

#include <algorithm>
#include <cstdint>

#include "gemm_own.h"
#include "gemm_panels.h"

namespace mixprec::cpu::own_gemm {

// K per packed block. A sum's order (KC-blocks added into C in turn) depends on it and on
// nothing else, so every build uses this one and gives the same bits. 384 measured best on
// a Xeon (48 KB L1, 2 MB L2): a larger KC amortises each micro-tile's C update better than it
// loses by the B micro-panel spilling from L1; 256 and 512 measured 2-5% slower.
inline constexpr int64_t kKC = 384;

// Internal linkage: each includer compiles its own copy under its own target options.
namespace {  // NOLINT(google-build-namespaces)

template <DType D>
constexpr int64_t kSize = D == DType::f32 ? 4 : 2;

// Element (r, c) of op(X).
template <DType D>
const char* element(const Block& x, int64_t r, int64_t c) {
  return static_cast<const char*>(x.data) + (x.trans ? c * x.ld + r : r * x.ld + c) * kSize<D>;
}

template <class Kernel, DType DA, DType DB>
void run_blocked(int64_t m, int64_t n, int64_t k, float alpha, const Block& a, const Block& b,
                 float beta, float* acc, int64_t ldacc, const GemmEpilogue& ep) {
  using gemm_panels::round_up;
  constexpr int64_t kMR = Kernel::kMR, kNR = Kernel::kNR, kMC = Kernel::kMC, kNC = Kernel::kNC;
  auto* bp = static_cast<float*>(
      gemm_panels::thread_buffer(1, sizeof(float) * kKC * round_up(std::min(n, kNC), kNR)));
  auto* ap = static_cast<float*>(
      gemm_panels::thread_buffer(0, sizeof(float) * round_up(std::min(m, kMC), kMR) * kKC));
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      Block bb = b;
      bb.data = element<DB>(b, pc, jc);
      Kernel::template pack_b<DB>(bb, kc, nc, bp);
      const bool first = pc == 0, last = pc + kc >= k;
      for (int64_t ic = 0; ic < m; ic += kMC) {
        const int64_t mc = std::min(kMC, m - ic);
        Block ab = a;
        ab.data = element<DA>(a, ic, pc);
        Kernel::template pack_a<DA>(ab, mc, kc, ap);
        for (int64_t jr = 0; jr < nc; jr += kNR)
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const gemm_panels::TileStore t =
                gemm_panels::tile_store(acc, ldacc, alpha, beta, ep, ic + ir, jc + jr, first, last);
            Kernel::micro_kernel(kc, ap + ir * kc, bp + jr * kc, t, std::min(kMR, mc - ir),
                                 std::min(kNR, nc - jr));
          }
      }
    }
  }
}

template <class Kernel, DType DA>
void run_with_b(int64_t m, int64_t n, int64_t k, float alpha, const Block& a, const Block& b,
                float beta, float* acc, int64_t ldacc, const GemmEpilogue& ep) {
  switch (b.dtype) {
    case DType::bf16:
      return run_blocked<Kernel, DA, DType::bf16>(m, n, k, alpha, a, b, beta, acc, ldacc, ep);
    case DType::f16:
      return run_blocked<Kernel, DA, DType::f16>(m, n, k, alpha, a, b, beta, acc, ldacc, ep);
    default:
      return run_blocked<Kernel, DA, DType::f32>(m, n, k, alpha, a, b, beta, acc, ldacc, ep);
  }
}

// gemm_own.h's gemm() for one build (m, n, k > 0).
template <class Kernel>
void run_gemm(int64_t m, int64_t n, int64_t k, float alpha, const Block& a, const Block& b,
              float beta, float* acc, int64_t ldacc, const GemmEpilogue& ep) {
  switch (a.dtype) {
    case DType::bf16:
      return run_with_b<Kernel, DType::bf16>(m, n, k, alpha, a, b, beta, acc, ldacc, ep);
    case DType::f16:
      return run_with_b<Kernel, DType::f16>(m, n, k, alpha, a, b, beta, acc, ldacc, ep);
    default:
      return run_with_b<Kernel, DType::f32>(m, n, k, alpha, a, b, beta, acc, ldacc, ep);
  }
}

}  // namespace
}  // namespace mixprec::cpu::own_gemm
