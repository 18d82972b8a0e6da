// Compiled with -mavx2 -mfma (this file only).
#include <immintrin.h>

#include "fma_peak.h"

namespace mixprec::bench {
namespace {

// 12 independent accumulators hide the FMA latency (4 cycles x 2 ports + slack).
double chains_avx2(long iters) {
  __m256 a[12];
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(static_cast<float>(i));
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

}  // namespace

double fma_peak_avx2(int threads) {
  return measure_fma_peak(threads, 8, chains_avx2);
}

}  // namespace mixprec::bench
