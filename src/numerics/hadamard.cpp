#include "mixprec/numerics/hadamard.h"

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/convert.h"

namespace mixprec {

namespace {

// One run of 16 as a vector (one register under AVX-512, two under AVX2); GCC 12 and Clang
// both take the vector extension and __builtin_shufflevector.
using Run = float __attribute__((vector_size(64)));

constexpr int kStages = 4;  // log2(16)
struct ButterflyTables {
  std::array<std::array<float, kRhtSize>, kStages> signs{};  // lane j of stage h: bit h set: -1
  std::array<float, kRhtSize> te{};                          // TE's signs
};
constexpr ButterflyTables kTables = [] {
  ButterflyTables t;
  for (int s = 0; s < kStages; ++s)
    for (int j = 0; j < kRhtSize; ++j)
      t.signs[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)] =
          (j & (1 << s)) ? -1.0f : 1.0f;
  for (int j = 0; j < kRhtSize; ++j)
    t.te[static_cast<std::size_t>(j)] = kTeRhtSigns[static_cast<std::size_t>(j)];
  return t;
}();

}  // namespace

// The butterflies lane-parallel: stage h is v·signs_h + v[j ^ h], the scalar butterfly's
// a + c (bit h of j clear) and a - c (set), each rounded alike: multiplying by +-1 is exact.
__attribute__((target_clones("avx512f", "avx2", "default"))) void rht16(float* x, int64_t n) {
  MIXPREC_CHECK(n % kRhtSize == 0, "rht16", "runs of 16, got " + std::to_string(n) + " values");
  Run te, signs[kStages];
  std::memcpy(&te, kTables.te.data(), sizeof te);
  for (int s = 0; s < kStages; ++s)
    std::memcpy(&signs[s], kTables.signs[static_cast<std::size_t>(s)].data(), sizeof(Run));
  for (int64_t b = 0; b < n; b += kRhtSize) {
    Run v;
    std::memcpy(&v, x + b, sizeof v);
    v *= te;
    // v[j ^ h] for h = 1, 2, 4, 8 (the shuffles take constant lane lists).
    v = v * signs[0] +
        __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    v = v * signs[1] +
        __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    v = v * signs[2] +
        __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    v = v * signs[3] +
        __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    v *= 0.25f;
    std::memcpy(x + b, &v, sizeof v);
  }
}

void rht16_in(float* x, int64_t n, DType dtype) {
  rht16(x, n);
  if (dtype == DType::f32) return;
  thread_local std::vector<char> narrow;
  narrow.resize(static_cast<std::size_t>(n) * dtype_size(dtype));
  narrow_row_f32(x, dtype, narrow.data(), static_cast<std::size_t>(n));
  widen_row_f32(dtype, narrow.data(), x, static_cast<std::size_t>(n));
}

}  // namespace mixprec
