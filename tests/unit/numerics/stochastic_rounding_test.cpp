// Stochastic rounding: unbiased within a stated statistical bound, the up-probability equals
// the discarded fraction, and bits are a pure function of (seed, stream, index).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/encode.h"

namespace mixprec {
namespace {

ConvertOptions sr(uint64_t seed, uint64_t stream = 0) {
  ConvertOptions o;
  o.rounding = Rounding::stochastic;
  o.seed = seed;
  o.stream = stream;
  return o;
}

std::vector<float> widen(DType dtype, const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  widen_to_f32(dtype, bits.data(), out.data(), bits.size());
  return out;
}

// N copies of x are rounded; each result is lo or hi = lo + ulp, up with probability p.
// The mean's standard error is ulp*sqrt(p(1-p)/N); we allow 6 standard errors, a false
// alarm rate below 1e-8 per check, and separately check the count of ups against p*N.
void expect_unbiased(DType dtype, float x, Isa isa) {
  constexpr std::size_t kN = 1 << 20;
  const std::vector<float> in(kN, x);
  std::vector<uint16_t> out(kN);
  convert_from_f32(in.data(), dtype, out.data(), kN, sr(2024), isa);
  const FloatFormat& f = *info(dtype).format;
  // lo: x truncated toward zero; hi: the next encoding away from zero.
  const uint32_t lo_bits = encode_f32(f, x, Rounding::toward_zero);
  const double lo = decode_f64(f, lo_bits);
  const double hi = decode_f64(f, lo_bits + 1);
  const double ulp = std::fabs(hi - lo);
  const double p = std::fabs(static_cast<double>(x) - lo) / ulp;
  double sum = 0;
  std::size_t ups = 0;
  for (const float v : widen(dtype, out)) {
    ASSERT_TRUE(v == lo || v == hi) << v;
    sum += v;
    ups += v == hi;
  }
  const double mean = sum / kN;
  const double se = ulp * std::sqrt(p * (1 - p) / kN);
  EXPECT_NEAR(mean, x, 6 * se + 1e-300) << "p=" << p;
  EXPECT_NEAR(static_cast<double>(ups) / kN, p, 6 * std::sqrt(p * (1 - p) / kN)) << "p=" << p;
}

TEST(StochasticRounding, UnbiasedForBf16AndF16OnBothPaths) {
  // Discarded fractions 1/2^16 .. 0.99: small, a quarter, a third, a half, most.
  const float xs[] = {std::bit_cast<float>(0x3F800010u),
                      1.0f + 0.25f / 128,
                      1.0f + 1.0f / 384,
                      std::bit_cast<float>(0x3F808000u),
                      -(1.0f + 0.99f / 128),
                      3.14159265f,
                      1e-3f,
                      -7.77e4f};
  for (const Isa isa : {Isa::scalar, Isa::best})
    for (const float x : xs) {
      SCOPED_TRACE(::testing::Message() << "x=" << x << " isa=" << isa_name(isa));
      expect_unbiased(DType::bf16, x, isa);
      if (std::fabs(x) < 65504) expect_unbiased(DType::f16, x, isa);
    }
}

TEST(StochasticRounding, UnbiasedInTheF16SubnormalRange) {
  // 1.3 * 2^-24: between 0x0001 and 0x0002, p = 0.3; and 0.2 * 2^-24: between 0 and 0x0001.
  expect_unbiased(DType::f16, 1.3f * 0x1p-24f, Isa::best);
  expect_unbiased(DType::f16, 0.2f * 0x1p-24f, Isa::best);
}

TEST(StochasticRounding, SameSeedSameBitsOtherSeedOrStreamOtherBits) {
  std::vector<float> in(100000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = 1.0f + static_cast<float>(i) * 1e-6f;
  auto run = [&](const ConvertOptions& o) {
    std::vector<uint16_t> out(in.size());
    convert_from_f32(in.data(), DType::bf16, out.data(), in.size(), o);
    return out;
  };
  EXPECT_EQ(run(sr(7)), run(sr(7)));
  EXPECT_NE(run(sr(7)), run(sr(8)));
  EXPECT_NE(run(sr(7, 0)), run(sr(7, 1)));
}

TEST(StochasticRounding, SameBitsForAnyThreadCount) {
  std::vector<float> in(1 << 20);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = std::sin(static_cast<float>(i)) * 100.0f;
  auto run = [&](int threads) {
    const int saved = num_threads();
    set_num_threads(threads);
    std::vector<uint16_t> out(in.size());
    convert_from_f32(in.data(), DType::f16, out.data(), in.size(), sr(99));
    set_num_threads(saved);
    return out;
  };
  EXPECT_EQ(run(1), run(2));
}

TEST(StochasticRounding, PiecewiseCallsWithIndexBaseEqualOneCall) {
  // Converting [0, n) at once equals converting [0, k) and [k, n) with index_base = k, for an
  // unaligned k, so results never depend on how a buffer is split.
  std::vector<float> in(1000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = 0.1f * static_cast<float>(i) + 0.013f;
  std::vector<uint8_t> whole(in.size()), parts(in.size());
  const ConvertOptions o = sr(5, 9);
  convert_from_f32(in.data(), DType::f8_e4m3fn, whole.data(), in.size(), o);
  const std::size_t k = 333;
  convert_from_f32(in.data(), DType::f8_e4m3fn, parts.data(), k, o);
  ConvertOptions rest = o;
  rest.index_base = k;
  convert_from_f32(in.data() + k, DType::f8_e4m3fn, parts.data() + k, in.size() - k, rest);
  EXPECT_EQ(whole, parts);
}

}  // namespace
}  // namespace mixprec
