// Compiled with -mavx512f (this file only); called only after a CPU check.
#include <immintrin.h>

#include "fma_peak.h"

namespace mixprec::bench {
namespace {

double chains_avx512(long iters) {
  __m512 a[12];
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}

}  // namespace

double fma_peak_avx512(int threads) {
  if (!__builtin_cpu_supports("avx512f")) return 0;
  return measure_fma_peak(threads, 16, chains_avx512);
}

}  // namespace mixprec::bench
