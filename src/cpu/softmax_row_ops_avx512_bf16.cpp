// The AVX-512 row kernels on bf16 rows for CPUs with AVX512_BF16 (and BW, DQ): the same
// source and math as softmax_row_ops_avx512.cpp, with cheaper bf16 row access and the same
// bits as vector_storage.h's. A row is stored by vcvtneps2bf16, one instruction for the ~10
// of the integer rounding (nearest even; a NaN keeps its sign and top payload bits and gets
// the quiet bit); it flushes subnormal inputs to zero, so a vector holding one (vfpclassps;
// rare) takes the integer rounding instead. A row is loaded by one word permute instead of a
// widen and a shift. Only reached after row_isa_supported(RowIsa::avx512_bf16).
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
#pragma clang attribute push(                                                      \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16,avx2,fma,f16c"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512bf16,avx2,fma,f16c")
#endif

#include "softmax_row_avx512.h"
#include "softmax_row_impl.h"

namespace mixprec::cpu {
namespace {

// vpermw's word indices: word 2j + 1 of the result is word j of the source.
alignas(64) constexpr uint16_t kOddWordsFromLow[32] = {0,  0,  1,  1,  2,  2,  3,  3,  4,  4,  5,
                                                       5,  6,  6,  7,  7,  8,  8,  9,  9,  10, 10,
                                                       11, 11, 12, 12, 13, 13, 14, 14, 15, 15};

struct F32x16Bf16 : F32x16 {
  // A bf16 is the top half of its f32: one word permute (zeroing the even words) widens 16.
  static V load_bf16(const bf16* p) {
    const __m512i h =
        _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i idx = _mm512_load_si512(kOddWordsFromLow);
    return reinterpret_cast<V>(_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, idx, h));
  }
  static void store_bf16(bf16* p, V v) {
    if (_mm512_fpclass_ps_mask(v, 0x20)) [[unlikely]] {  // 0x20: subnormal
      simd::StorageLanes<16>::store(p, v);
      return;
    }
    store_bf16_normal(p, v);
  }
  // For a v with no subnormal lane.
  static void store_bf16_normal(bf16* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
  }
};

constexpr StoredRowOps<bf16> kAvx512Bf16Rows = make_stored_row_ops<F32x16Bf16, bf16>();

}  // namespace

const StoredRowOps<bf16>& avx512_bf16_stored_rows() {
  return kAvx512Bf16Rows;
}

}  // namespace mixprec::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
