// Every one of the 2^32 f32 bit patterns cast to E2M1 (both overflow conventions, and through
// f64) and to E8M0 (ml_dtypes' plain cast), against ml_dtypes' own result for each
// (fixtures/fp4/ml_dtypes.safetensors, run-length coded by make_fp4_fixtures.py). Under
// sanitizers every 61st chunk of 65536 patterns runs instead.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>

#include "fp4_fixture.h"
#include "mixprec/numerics/e8m0.h"
#include "mixprec/numerics/fp4.h"

namespace mixprec {
namespace {

#ifdef MIXPREC_SANITIZED
constexpr uint64_t kChunkStride = 61;
#else
constexpr uint64_t kChunkStride = 1;
#endif
constexpr uint64_t kChunk = 1 << 16;

// Calls check(bits, want) for every f32 pattern, with want from the run table; returns the
// number of mismatches (the first few are reported).
template <class Check>
uint64_t count_mismatches(const testing::F32RunTable& table, Check&& check) {
  std::atomic<uint64_t> bad{0};
#pragma omp parallel for schedule(dynamic, 16)
  for (uint64_t c = 0; c < (uint64_t{1} << 32) / kChunk; c += kChunkStride) {
    const auto first = static_cast<uint32_t>(c * kChunk);
    const std::vector<int64_t>& starts = table.starts();
    // The run holding `first`, and where the next one starts (2^32 past the last).
    std::size_t run = static_cast<std::size_t>(
        std::upper_bound(starts.begin(), starts.end(), int64_t{first}) - starts.begin() - 1);
    const auto next_start = [&] {
      return run + 1 < starts.size() ? starts[run + 1] : int64_t{1} << 32;
    };
    int64_t next = next_start();
    for (uint64_t i = 0; i < kChunk; ++i) {
      const auto x = static_cast<uint32_t>(first + i);
      if (int64_t{x} == next) {
        ++run;
        next = next_start();
      }
      const uint8_t want = table.values()[run];
      if (!check(x, want) && bad.fetch_add(1) < 5)
        ADD_FAILURE() << "f32 0x" << std::hex << x << " (" << std::bit_cast<float>(x) << ") want 0x"
                      << +want;
    }
  }
  return bad.load();
}

TEST(ExhaustiveFp4, EveryF32CastsToE2M1AsMlDtypes) {
  const testing::F32RunTable table("e2m1.from_f32");
  constexpr Rounding RNE = Rounding::nearest_even;
  EXPECT_EQ(count_mismatches(table,
                             [](uint32_t x, uint8_t want) {
                               const float v = std::bit_cast<float>(x);
                               if (e2m1_from_f32(v, RNE, 0, OverflowConvention::ml_dtypes) != want)
                                 return false;
                               // satfinite differs from ml_dtypes on NaN only.
                               if (std::isnan(v)) return e2m1_from_f32(v) == 0x7;
                               return e2m1_from_f32(v) == want &&
                                      e2m1_from_f64(v, RNE, 0, OverflowConvention::ml_dtypes) ==
                                          want;
                             }),
            0u);
}

TEST(ExhaustiveFp4, EveryF32CastsToE8M0AsMlDtypes) {
  const testing::F32RunTable table("e8m0.from_f32");
  EXPECT_EQ(count_mismatches(table,
                             [](uint32_t x, uint8_t want) {
                               return e8m0_from_f32_ml_dtypes(std::bit_cast<float>(x)) == want;
                             }),
            0u);
}

}  // namespace
}  // namespace mixprec
