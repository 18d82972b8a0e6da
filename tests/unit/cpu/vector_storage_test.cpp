// The vector loads and stores kernels use for bf16 / f16 rows (src/numerics/vector_storage.h),
// per ISA, against the scalar encoder and decoder: every 16-bit pattern is loaded, and every
// high half of an f32 combined with low halves that decide the rounding (0, 1, just below,
// at and just above the tie, all ones) is stored, for the baseline, AVX2 and AVX-512 builds.
#include "numerics/vector_storage.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/encode.h"

namespace mixprec::simd {
namespace {

// Each build converts whole arrays (n a multiple of 16) through its own vectors.
template <int L, class T>
MIXPREC_INLINE void load_all(const T* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; i += L) {
    const auto v = StorageLanes<L>::load(src + i);
    std::memcpy(dst + i, &v, sizeof v);
  }
}
template <int L, class T>
MIXPREC_INLINE void store_all(const float* src, T* dst, size_t n) {
  for (size_t i = 0; i < n; i += L) {
    typename Lanes<L>::vf v;
    std::memcpy(&v, src + i, sizeof v);
    StorageLanes<L>::store(dst + i, v);
  }
}

template <class T>
void load4(const T* s, float* d, size_t n) {
  load_all<4>(s, d, n);
}
template <class T>
void store4(const float* s, T* d, size_t n) {
  store_all<4>(s, d, n);
}
template <class T>
[[gnu::target("avx2,fma,f16c"), gnu::flatten]] void load8(const T* s, float* d, size_t n) {
  load_all<8>(s, d, n);
}
template <class T>
[[gnu::target("avx2,fma,f16c"), gnu::flatten]] void store8(const float* s, T* d, size_t n) {
  store_all<8>(s, d, n);
}
template <class T>
[[gnu::target("avx512f,avx2,fma,f16c"), gnu::flatten]] void load16(const T* s, float* d, size_t n) {
  load_all<16>(s, d, n);
}
template <class T>
[[gnu::target("avx512f,avx2,fma,f16c"), gnu::flatten]] void store16(const float* s, T* d,
                                                                    size_t n) {
  store_all<16>(s, d, n);
}

template <class T>
struct Build {
  const char* name;
  bool supported;
  void (*load)(const T*, float*, size_t);
  void (*store)(const float*, T*, size_t);
};

template <class T>
std::vector<Build<T>> builds() {
  return {{"baseline", true, load4<T>, store4<T>},
          {"avx2", cpu_has_avx2_f16c(), load8<T>, store8<T>},
          {"avx512", cpu_has_avx512f(), load16<T>, store16<T>}};
}

template <class T>
void check(const FloatFormat& format) {
  std::vector<T> all(1 << 16);  // every 16-bit pattern
  for (uint32_t b = 0; b < all.size(); ++b) all[b] = T::from_bits(b);
  std::vector<float> wide;  // high halves x rounding-relevant low halves
  for (uint32_t hi = 0; hi < (1u << 16); ++hi)
    for (uint32_t lo :
         {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      wide.push_back(std::bit_cast<float>(hi << 16 | lo));
  for (const Build<T>& b : builds<T>()) {
    if (!b.supported) continue;
    std::vector<float> loaded(all.size());
    b.load(all.data(), loaded.data(), all.size());
    for (uint32_t i = 0; i < all.size(); ++i) {
      const float want = decode_f32(format, i);
      ASSERT_TRUE(std::memcmp(&loaded[i], &want, 4) == 0 ||
                  (want != want && loaded[i] != loaded[i]))
          << b.name << " load of 0x" << std::hex << i;
    }
    std::vector<T> stored(wide.size());
    b.store(wide.data(), stored.data(), wide.size());
    for (size_t i = 0; i < wide.size(); ++i)
      ASSERT_EQ(stored[i].bits, encode_f32(format, wide[i]))
          << b.name << " store of 0x" << std::hex << std::bit_cast<uint32_t>(wide[i]);
  }
}

TEST(VectorStorage, Bf16LoadsAndStoresOfEveryBuildMatchTheScalarCodec) {
  check<bf16>(kFormatBF16);
}

TEST(VectorStorage, F16LoadsAndStoresOfEveryBuildMatchTheScalarCodec) {
  check<f16>(kFormatF16);
}

}  // namespace
}  // namespace mixprec::simd
