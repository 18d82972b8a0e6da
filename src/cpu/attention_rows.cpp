// Softmax row helpers of the attention kernels: a branch-free f32 exp on GCC vectors (libm's
// expf would cost as much as the GEMMs at head dim 64; plain loops are not vectorised because
// of the selects), and max/sum over fixed lanes so the summation order is part of the source,
// not of the vector width. SSE2 and AVX2 paths do the same IEEE operations and give the same
// bits; the AVX-512 target also enables FMA, which the compiler uses in the polynomial (a
// last-bit difference, fixed per machine like OpenBLAS's kernel choice).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "mixprec/cpu/attention.h"

namespace mixprec::cpu {
namespace {

constexpr int kLanes = 16;

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

// ptr[0..W) = exp(ptr * scale - shift), W = lanes of V; acc[0..W) += the results. Cephes expf:
// x = n·ln2 + r, |r| <= ln2/2, exp(r) by a degree-7 polynomial, times 2^n built in the
// exponent bits. Inlined into each ISA's loop (vectors never cross a call: their ABI depends
// on the ISA).
template <class V, class VI>
__attribute__((always_inline)) inline void exp_vec(float* ptr, float scale, float shift,
                                                   float* acc) {
  constexpr float kLo = -87.33654f;  // exp(kLo) = FLT_MIN: below this return 0
  constexpr float kHi = 88.3762626f;
  V x, sum;
  std::memcpy(&x, ptr, sizeof(V));
  std::memcpy(&sum, acc, sizeof(V));
  x = x * scale - shift;
  const V lo = V{} + kLo, hi = V{} + kHi;
  V xc = x > hi ? hi : x;
  xc = xc < lo ? lo : xc;  // a NaN passes both selects and stays NaN
  // n = round(x / ln2) by the 1.5·2^23 trick (no rounding instruction needed).
  const V magic = V{} + 12582912.0f;
  const V n = (xc * 1.44269504088896341f + magic) - magic;
  // r = x - n·ln2 with ln2 split into an exact high part and a low correction.
  const V r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  V p = V{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const VI e = __builtin_convertvector(n, VI) + 127;  // n in [-126, 127]: a normal 2^n
  const V two_n = reinterpret_cast<V>(e << 23);
  const V y = x < lo ? V{} : p * two_n;
  sum += y;
  std::memcpy(ptr, &y, sizeof(V));
  std::memcpy(acc, &sum, sizeof(V));
}

// exp over a row, kLanes elements per step (kLanes / W vectors: independent chains), summed
// into kLanes lanes: element i always lands in lane i % kLanes, whatever W is. The tail goes
// through a copy padded with -inf (exp 0, adding nothing).
template <class V, class VI>
__attribute__((always_inline)) inline float exp_row(float* x, float scale, float shift, int64_t n) {
  constexpr int w = sizeof(V) / sizeof(float);
  alignas(64) float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; j += w) exp_vec<V, VI>(x + i + j, scale, shift, lanes + j);
  if (i < n) {
    alignas(64) float tail[kLanes];
    std::fill(tail, tail + kLanes, -std::numeric_limits<float>::infinity());
    std::memcpy(tail, x + i, sizeof(float) * (n - i));
    for (int j = 0; j < kLanes; j += w) exp_vec<V, VI>(tail + j, scale, shift, lanes + j);
    std::memcpy(x + i, tail, sizeof(float) * (n - i));
  }
  // Lanes folded in halves: a fixed tree the compiler does with shuffles.
  for (int half = kLanes / 2; half >= 1; half /= 2)
    for (int j = 0; j < half; ++j) lanes[j] += lanes[j + half];
  return lanes[0];
}

// max over kLanes running lanes (exact whatever the order), vectorised by the compiler for
// the ISA of the function it is inlined into.
__attribute__((always_inline)) inline float max_row(const float* x, int64_t n) {
  float lanes[kLanes];
  for (int j = 0; j < kLanes; ++j) lanes[j] = x[0];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lanes[j] = x[i + j] > lanes[j] ? x[i + j] : lanes[j];
  for (int j = 0; i + j < n; ++j) lanes[j] = x[i + j] > lanes[j] ? x[i + j] : lanes[j];
  float m = lanes[0];
  for (int j = 1; j < kLanes; ++j) m = lanes[j] > m ? lanes[j] : m;
  return m;
}

float max_row_sse2(const float* x, int64_t n) {
  return max_row(x, n);
}

__attribute__((target("avx512f"))) float max_row_avx512(const float* x, int64_t n) {
  return max_row(x, n);
}

float exp_row_sse2(float* x, float scale, float shift, int64_t n) {
  return exp_row<v4f, v4i>(x, scale, shift, n);
}

__attribute__((target("avx2"))) float exp_row_avx2(float* x, float scale, float shift, int64_t n) {
  return exp_row<v8f, v8i>(x, scale, shift, n);
}

__attribute__((target("avx512f"))) float exp_row_avx512(float* x, float scale, float shift,
                                                        int64_t n) {
  return exp_row<v16f, v16i>(x, scale, shift, n);
}

// The widest path this CPU runs (and its OS saves the registers of).
struct Paths {
  float (*exp_row)(float*, float, float, int64_t);
  float (*max_row)(const float*, int64_t);
};

const Paths& best_paths() {
  static const Paths paths = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Paths{exp_row_avx512, max_row_avx512};
    if (__builtin_cpu_supports("avx2")) return Paths{exp_row_avx2, max_row_sse2};
    return Paths{exp_row_sse2, max_row_sse2};
  }();
  return paths;
}

}  // namespace

float exp_scaled_sum(float* x, float scale, float shift, int64_t n) {
  return best_paths().exp_row(x, scale, shift, n);
}

bool exp_scaled_sum_isa(int isa, float* x, float scale, float shift, int64_t n, float* sum) {
  __builtin_cpu_init();
  if (isa == 512 && !__builtin_cpu_supports("avx512f")) return false;
  if (isa == 256 && !__builtin_cpu_supports("avx2")) return false;
  *sum = isa == 512   ? exp_row_avx512(x, scale, shift, n)
         : isa == 256 ? exp_row_avx2(x, scale, shift, n)
                      : exp_row_sse2(x, scale, shift, n);
  return true;
}

double exp_scaled_sum(double* x, double scale, double shift, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] * scale - shift);
    sum += x[i];
  }
  return sum;
}

float row_max(const float* x, int64_t n) {
  return best_paths().max_row(x, n);
}

double row_max(const double* x, int64_t n) {
  double m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

}  // namespace mixprec::cpu
