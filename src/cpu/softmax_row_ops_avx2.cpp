// The AVX2+FMA build of the row kernels: the same source as the portable build, compiled
// for 8-lane f32 vectors. Only reached after cpu_has_avx2_f16c(). Standard headers come
// before the target switch so none of their inline code is compiled for AVX2.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <immintrin.h>

#include "softmax_row_ops.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

#include "softmax_row_impl.h"

namespace mixprec::cpu {
namespace {

struct F32x8 {
  using S = float;
  using V = float __attribute__((vector_size(32)));
  using U = uint32_t __attribute__((vector_size(32)));
  // vmaxps/vminps return their second operand when either is NaN: x, so NaN stays NaN.
  static V clamp(V x, float lo, float hi) {
    return _mm256_min_ps(_mm256_set1_ps(hi), _mm256_max_ps(_mm256_set1_ps(lo), x));
  }
};

constexpr RowOps<float> kAvx2F32 = make_row_ops<F32x8>();

}  // namespace

const RowOps<float>& avx2_row_ops_f32() {
  return kAvx2F32;
}

}  // namespace mixprec::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
