// Compiled with -mavx512f -mavx512bf16 (this file only); called only after a CPU check.
#include <immintrin.h>

#include "fma_peak.h"

namespace mixprec::bench {
namespace {

// 12 chains of VDPBF16PS: 16 lanes x 2 products each per instruction.
double chains_dpbf16(long iters) {
  __m512 a[12];
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.999f), _mm512_set1_ps(1e-3f));
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], b, b);
  }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}

}  // namespace

double dot_peak_avx512_bf16(int threads) {
  if (!__builtin_cpu_supports("avx512bf16")) return 0;
  return measure_fma_peak(threads, 32, chains_dpbf16);  // 32 "lanes": two products per lane
}

}  // namespace mixprec::bench
