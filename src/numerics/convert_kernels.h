// Private interface between the bulk dispatcher and the per-ISA conversion kernels.
// Each kernel converts one chunk; `index0` is the global element index of src[0], which keys
// the stochastic-rounding random numbers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mixprec/numerics/float_format.h"
#include "mixprec/numerics/rounding.h"

namespace mixprec::kernels {

// Portable scalar kernels (convert_scalar.cpp): the reference the SIMD kernels must match.
void scalar_narrow_f32(const FloatFormat& f, const float* src, void* dst, std::size_t n,
                       const ConvertOptions& o, uint64_t index0);
void scalar_narrow_f64(const FloatFormat& f, const double* src, void* dst, std::size_t n,
                       const ConvertOptions& o, uint64_t index0);
void scalar_widen_f32(const FloatFormat& f, const void* src, float* dst, std::size_t n);
void scalar_tf32(const float* src, float* dst, std::size_t n, const ConvertOptions& o,
                 uint64_t index0);

// AVX2/F16C kernels (convert_avx2.cpp). Each handles a prefix of the chunk and returns how
// many elements it did (a multiple of its vector width); the caller finishes the tail with
// the scalar kernel. Stochastic rounding requires index0 % 4 == 0.
std::size_t avx2_narrow_f32(const FloatFormat& f, const float* src, void* dst, std::size_t n,
                            const ConvertOptions& o, uint64_t index0);
std::size_t avx2_widen_f32(const FloatFormat& f, const void* src, float* dst, std::size_t n);
std::size_t avx2_tf32(const float* src, float* dst, std::size_t n, const ConvertOptions& o,
                      uint64_t index0);

// AVX-512F kernels (convert_avx512.cpp) for bf16 and f16 only, round to nearest even only
// (what the compute kernels' row loads and stores use); same prefix contract as above.
std::size_t avx512_widen_f32(const FloatFormat& f, const void* src, float* dst, std::size_t n);
std::size_t avx512_narrow_f32_nearest(const FloatFormat& f, const float* src, void* dst,
                                      std::size_t n);

}  // namespace mixprec::kernels
