// The AVX-512 build of the row kernels: the same source as the portable build, compiled
// for 16-lane f32 vectors. Only reached after cpu_has_avx512f(). Standard headers come
// before the target switch so none of their inline code is compiled for AVX-512.
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
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma,f16c")
#endif

#include "softmax_row_avx512.h"
#include "softmax_row_impl.h"

namespace mixprec::cpu {
namespace {

constexpr RowKernels kAvx512Kernels = make_row_kernels<F32x16>();

}  // namespace

const RowKernels& avx512_row_kernels() {
  return kAvx512Kernels;
}

}  // namespace mixprec::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
