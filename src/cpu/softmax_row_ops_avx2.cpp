// The AVX2+FMA build of the row kernels: the same source as the portable build, compiled
// for 8-lane f32 vectors. Only reached after cpu_has_avx2_f16c(). Standard headers come
// before the target switch so none of their inline code is compiled for AVX2.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include <immintrin.h>

#include "../numerics/vector_storage.h"
#include "mixprec/numerics/storage_types.h"
#include "softmax_row_ops.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "softmax_row_impl.h"

namespace mixprec::cpu {
namespace {

struct F32x8 {
  using S = float;
  using V = float __attribute__((vector_size(32)));
  static constexpr bool kScalef = false;  // 2^n from integer bits
  static constexpr bool kFma = true;      // a * b + c contracts to one FMA
  using U = uint32_t __attribute__((vector_size(32)));
  // vmaxps/vminps return their second operand when either is NaN: x, so NaN stays NaN.
  static V clamp(V x, float lo, float hi) {
    return _mm256_min_ps(_mm256_set1_ps(hi), _mm256_max_ps(_mm256_set1_ps(lo), x));
  }
};

constexpr RowKernels kAvx2Kernels = make_row_kernels<F32x8>();

}  // namespace

const RowKernels& avx2_row_kernels() {
  return kAvx2Kernels;
}

}  // namespace mixprec::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
