// AVX-512F row conversions for the kernels' hot path (widen_row_f32 / narrow_row_f32, nearest
// even only): 16 lanes per instruction where the AVX2 kernels have 8, through the same vector
// loads and stores the compute kernels use (vector_storage.h). Compiled with -mavx512f
// (CMakeLists.txt) and called only after cpu_has_avx512f(); the bits are those of the scalar
// encoder (bulk_convert_test compares every path with it).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "convert_kernels.h"
#include "vector_storage.h"

namespace mixprec::kernels {
namespace {

using simd::StorageLanes;
using vf = simd::Lanes<16>::vf;

// Whole vectors of 16 from storage T to f32, or back; returns how many elements were done.
template <class T>
std::size_t widen16(const void* src, float* dst, std::size_t n) {
  const std::size_t done = n / 16 * 16;
  const auto* s = static_cast<const T*>(src);
  for (std::size_t i = 0; i < done; i += 16) {
    const vf v = StorageLanes<16>::load(s + i);
    std::memcpy(dst + i, &v, sizeof v);
  }
  return done;
}
template <class T>
std::size_t narrow16(const float* src, void* dst, std::size_t n) {
  const std::size_t done = n / 16 * 16;
  auto* d = static_cast<T*>(dst);
  for (std::size_t i = 0; i < done; i += 16) {
    vf v;
    std::memcpy(&v, src + i, sizeof v);
    StorageLanes<16>::store(d + i, v);
  }
  return done;
}

}  // namespace

std::size_t avx512_widen_f32(const FloatFormat& f, const void* src, float* dst, std::size_t n) {
  if (&f == &kFormatBF16) return widen16<bf16>(src, dst, n);
  if (&f == &kFormatF16) return widen16<f16>(src, dst, n);
  return 0;
}

std::size_t avx512_narrow_f32_nearest(const FloatFormat& f, const float* src, void* dst,
                                      std::size_t n) {
  if (&f == &kFormatBF16) return narrow16<bf16>(src, dst, n);
  if (&f == &kFormatF16) return narrow16<f16>(src, dst, n);
  return 0;
}

}  // namespace mixprec::kernels
