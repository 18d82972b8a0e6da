#include "mixprec/numerics/hadamard.h"

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/convert.h"

namespace mixprec {

namespace {

// One run of 16 as a vector (GCC's extension: one register under AVX-512, two under AVX2).
using Run = float __attribute__((vector_size(64)));
using Lanes = int32_t __attribute__((vector_size(64)));

constexpr int kStages = 4;  // log2(16)
struct ButterflyTables {
  std::array<std::array<float, kRhtSize>, kStages> signs{};      // lane j of stage h: bit h set: -1
  std::array<std::array<int32_t, kRhtSize>, kStages> partner{};  // j ^ h
  std::array<float, kRhtSize> te{};                              // TE's signs
};
constexpr ButterflyTables kTables = [] {
  ButterflyTables t;
  for (int s = 0; s < kStages; ++s)
    for (int j = 0; j < kRhtSize; ++j) {
      const int h = 1 << s;
      t.signs[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)] = (j & h) ? -1.0f : 1.0f;
      t.partner[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)] = j ^ h;
    }
  for (int j = 0; j < kRhtSize; ++j)
    t.te[static_cast<std::size_t>(j)] = kTeRhtSigns[static_cast<std::size_t>(j)];
  return t;
}();

}  // namespace

#if defined(__GNUC__) && !defined(__clang__)
// The butterflies lane-parallel: stage h is v·signs_h + v[j ^ h], the scalar butterfly's
// a + c (bit h of j clear) and a - c (set), each rounded alike: multiplying by +-1 is exact.
__attribute__((target_clones("avx512f", "avx2", "default"))) void rht16(float* x, int64_t n) {
  MIXPREC_CHECK(n % kRhtSize == 0, "rht16", "runs of 16, got " + std::to_string(n) + " values");
  Run te, signs[kStages];
  Lanes partner[kStages];
  std::memcpy(&te, kTables.te.data(), sizeof te);
  for (int s = 0; s < kStages; ++s) {
    std::memcpy(&signs[s], kTables.signs[static_cast<std::size_t>(s)].data(), sizeof(Run));
    std::memcpy(&partner[s], kTables.partner[static_cast<std::size_t>(s)].data(), sizeof(Lanes));
  }
  for (int64_t b = 0; b < n; b += kRhtSize) {
    Run v;
    std::memcpy(&v, x + b, sizeof v);
    v *= te;
    for (int s = 0; s < kStages; ++s) v = v * signs[s] + __builtin_shuffle(v, partner[s]);
    v *= 0.25f;
    std::memcpy(x + b, &v, sizeof v);
  }
}
#else
// Other compilers: the same butterflies a lane at a time (GCC's vector shuffle is GCC's own).
void rht16(float* x, int64_t n) {
  MIXPREC_CHECK(n % kRhtSize == 0, "rht16", "runs of 16, got " + std::to_string(n) + " values");
  for (int64_t b = 0; b < n; b += kRhtSize) {
    float* v = x + b;
    for (int j = 0; j < kRhtSize; ++j) v[j] *= kTables.te[static_cast<std::size_t>(j)];
    for (int s = 0; s < kStages; ++s) {
      float y[kRhtSize];
      for (int j = 0; j < kRhtSize; ++j) {
        const auto sj = static_cast<std::size_t>(j), ss = static_cast<std::size_t>(s);
        y[j] = v[j] * kTables.signs[ss][sj] + v[kTables.partner[ss][sj]];
      }
      std::memcpy(v, y, sizeof y);
    }
    for (int j = 0; j < kRhtSize; ++j) v[j] *= 0.25f;
  }
}
#endif

void rht16_in(float* x, int64_t n, DType dtype) {
  rht16(x, n);
  if (dtype == DType::f32) return;
  thread_local std::vector<char> narrow;
  narrow.resize(static_cast<std::size_t>(n) * dtype_size(dtype));
  narrow_row_f32(x, dtype, narrow.data(), static_cast<std::size_t>(n));
  widen_row_f32(dtype, narrow.data(), x, static_cast<std::size_t>(n));
}

}  // namespace mixprec
