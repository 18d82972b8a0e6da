// What mixprec's GEMM block products (gemm_blocked.h's builds, gemm_avx512_bf16.cpp) share
// whatever their ISA: the per-thread panel buffers, and where a micro-tile's sums go (the
// alpha/beta store, the epilogue's bias and rounding) and its C tile's early fetch. Each
// ISA's tile store is its own (gemm_tile_avx512.h, gemm_avx2.cpp).
#pragma once

#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>

#include "gemm_epilogue.h"

// Under the sanitizers (CI's build-asan) a micro-kernel's loop over the packed panels runs
// unchecked: it reads only the panels that packing wrote just before, at offsets of the same kc,
// and the checks on each of its loads held 81% of a DeepSeek-V3 memory-plan test's time (245 s
// with them, 33 s without). Packing, which reads the caller's operands, and the tile store,
// which writes C, stay checked: kept out of line there.
#ifdef MIXPREC_SANITIZED
#define MIXPREC_PANEL_LOOP [[gnu::no_sanitize_address, gnu::no_sanitize_undefined]]
#define MIXPREC_CHECKED_STORE [[gnu::noinline]]
#else
#define MIXPREC_PANEL_LOOP
#define MIXPREC_CHECKED_STORE
#endif

namespace mixprec::cpu::gemm_panels {

// 64-byte aligned buffer `slot` (0: packed A, 1: packed B) of this thread, at least `bytes`
// long. Kept between calls (fresh ones would page-fault) and shared by the block products,
// which never run nested.
void* thread_buffer(int slot, size_t bytes);

// Internal linkage: each includer compiles its own copy under its own target options.
namespace {  // NOLINT(google-build-namespaces)

inline int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

// The C tile is needed only after the K loop, but it usually lives in L3 by then: fetching
// it first hides that latency behind the products (measured 4% on a 16 MB C).
inline void prefetch_c_tile(const float* c, int64_t ldc, int64_t rows) {
  for (int64_t i = 0; i < rows; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
  }
}

// Where one micro-tile's sums go (gemm_epilogue.h): c (f32, alpha·s + beta·c), or, when
// `bias` is set, alpha·s + bias; rounded to bf16 (f16 when out_f16) into `out` when that is
// set, else into c.
struct TileStore {
  float* c;
  int64_t ldc;
  float alpha, beta;
  const float* bias;
  uint16_t* out;
  int64_t ldout;
  bool out_f16;
};

// The store of the micro-tile at row i, column j of C for a K-block that is the first and/or
// the last: beta and the bias belong to the first, the epilogue's rounding to the last.
inline TileStore tile_store(float* acc, int64_t ldacc, float alpha, float beta,
                            const GemmEpilogue& ep, int64_t i, int64_t j, bool first, bool last) {
  return {acc != nullptr ? acc + i * ldacc + j : nullptr,
          ldacc,
          alpha,
          first ? beta : 1.0f,
          first && ep.bias != nullptr ? ep.bias + j : nullptr,
          last && ep.out != nullptr ? ep.out + i * ep.ldout + j : nullptr,
          ep.ldout,
          ep.out_f16};
}

}  // namespace
}  // namespace mixprec::cpu::gemm_panels
