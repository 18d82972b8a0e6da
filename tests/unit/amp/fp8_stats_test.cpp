// The FP8 cast statistics (amp/fp8_stats.h) on hand-built tensors, counted by hand: amax of
// the finite elements, the stored scale range, elements saturated (rounded past max finite
// without the saturating cast), flushed to zero and non-finite, for tensorwise, rowwise and MX
// casts, and inf sources under torchao's and TE's rules.
#include "mixprec/amp/fp8_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/backend/backend.h"
#include "mixprec/numerics/hadamard.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using backend::QuantSpec;

constexpr double kInf = INFINITY;

Fp8TensorStats stats_of(const Tensor& x, const QuantSpec& spec) {
  return fp8_tensor_stats(x, backend::current().quantize(x, spec));
}

Tensor matrix(std::vector<double> v, int64_t rows, DType dtype = DType::f32) {
  const auto cols = static_cast<int64_t>(v.size()) / rows;
  return Tensor::from_doubles(v, {rows, cols}, dtype);
}

// torchao's tensorwise cast: v = f32(448 / amax). For this amax, amax·v in f32 is 448.00003,
// a hair above max finite that rounds to 448 anyway: not saturated (the cast changed nothing).
TEST(Fp8TensorStats, TensorwiseCountsFlushedAndIgnoresTheHairAboveMaxFinite) {
  const double amax = 762.517822265625;
  const Tensor x = matrix({amax, 1e-6, 0, -1, 2, 3, -4, 1e-9}, 2);
  const QuantSpec spec{.element = DType::f8_e4m3fn, .block = {0, 0}, .rule = ScaleRule::torchao};
  const Fp8TensorStats s = stats_of(x, spec);
  const float v = static_cast<float>(448.0 / amax);
  ASSERT_GT(static_cast<float>(amax) * v, 448.0f) << "the test's amax no longer shows the case";
  EXPECT_EQ(s.numel, 8);
  EXPECT_EQ(s.amax, static_cast<float>(amax));
  EXPECT_EQ(s.scales, 1);
  EXPECT_EQ(s.scale_min, v);
  EXPECT_EQ(s.scale_max, v);
  EXPECT_EQ(s.saturated, 0);
  EXPECT_EQ(s.flushed, 2);  // 1e-6 and 1e-9 (the zero was zero already)
  EXPECT_EQ(s.nonfinite, 0);
  EXPECT_DOUBLE_EQ(s.flushed_fraction(), 0.25);
}

// TE's rule gives scale 1 for an inf amax, so the finite values past 464 (448's rounding
// boundary in e4m3fn) saturate; 460 rounds to 448 by itself.
TEST(Fp8TensorStats, AnInfSourceUnderTeSaturatesTheLargeValues) {
  const Tensor x = matrix({kInf, 500, 470, 460, 1, -1000, 1e-4, 0}, 2);
  const QuantSpec spec{.element = DType::f8_e4m3fn, .block = {0, 0}, .rule = ScaleRule::te};
  const Fp8TensorStats s = stats_of(x, spec);
  EXPECT_EQ(s.nonfinite, 1);
  EXPECT_EQ(s.amax, 1000.0f);  // of the finite elements
  EXPECT_EQ(s.scale_min, 1.0f);
  EXPECT_EQ(s.saturated, 3);  // 500, 470, -1000
  EXPECT_EQ(s.flushed, 1);    // 1e-4 < 2^-10, half e4m3's smallest subnormal
}

// torchao's rule: an inf amax gives v = 448 / inf = 0, and every finite value is flushed.
TEST(Fp8TensorStats, AnInfSourceUnderTorchaoFlushesTheWholeTensor) {
  const Tensor x = matrix({kInf, 2, 1, -3}, 2);
  const QuantSpec spec{.element = DType::f8_e4m3fn, .block = {0, 0}, .rule = ScaleRule::torchao};
  const Fp8TensorStats s = stats_of(x, spec);
  EXPECT_EQ(s.nonfinite, 1);
  EXPECT_EQ(s.amax, 3.0f);
  EXPECT_EQ(s.scale_max, 0.0f);
  EXPECT_EQ(s.flushed, 3);
  EXPECT_EQ(s.saturated, 0);
}

// A NaN source gives its block a NaN scale (MX: NaN amax), and a zero source in that block is
// stored as NaN, not 0: nothing there counts as flushed (the count must not go negative).
TEST(Fp8TensorStats, ANanScaleFlushesNothing) {
  const Tensor x = matrix({NAN, 0, 0, 1, 2, 0, 3, 1e-30}, 1);
  for (ScaleRule rule : {ScaleRule::mx_floor, ScaleRule::deepseek}) {
    const QuantSpec spec{.element = DType::f8_e4m3fn, .block = {1, 4}, .rule = rule};
    const Fp8TensorStats s = stats_of(x, spec);
    EXPECT_EQ(s.nonfinite, 1) << scale_rule_info(rule).name;
    EXPECT_EQ(s.flushed, 1) << scale_rule_info(rule).name;  // 1e-30 in the finite block
  }
}

// torchao rowwise (power-of-two scales, rounded down: nothing saturates), bf16 source.
TEST(Fp8TensorStats, RowwiseScalesPerRow) {
  const Tensor x = matrix({448, 1e-4, -2, 0, 1, 1e-6, 1e-5, -0.5}, 2, DType::bf16);
  const QuantSpec spec{
      .element = DType::f8_e4m3fn, .block = {1, 0}, .rule = ScaleRule::torchao, .pow2 = true};
  const Fp8TensorStats s = stats_of(x, spec);
  EXPECT_EQ(s.scales, 2);
  EXPECT_EQ(s.scale_min, 1.0f);    // row 0: 448 / 448
  EXPECT_EQ(s.scale_max, 256.0f);  // row 1: 448 / 1, down to a power of two
  EXPECT_EQ(s.amax, 448.0f);
  EXPECT_EQ(s.saturated, 0);
  // row 0: 1e-4 (·1); row 1: 1e-6 (·256 = 2.6e-4); 1e-5 ·256 = 2.6e-3 is stored
  EXPECT_EQ(s.flushed, 2);
}

// MX (OCP FLOOR): v = 2^(floor(log2 amax) - 8) divides, so a block's values between 464 and
// 512 saturate by design.
TEST(Fp8TensorStats, MxFloorSaturatesTheTopOfItsBlocks) {
  std::vector<double> v(128, 0.25);  // row 1: amax 0.25 in both blocks, v = 2^-10
  for (int i = 0; i < 32; ++i) v[i] = 1;
  v[0] = 500, v[1] = 470, v[2] = 460, v[3] = -448, v[4] = 1e-4, v[5] = 0;  // block 0: v = 1
  for (int i = 32; i < 64; ++i) v[i] = 0.5;
  v[32] = 1, v[33] = 1e-6, v[34] = -1e-6;  // block 1: v = 2^-8
  const Tensor x = matrix(v, 2);
  const QuantSpec spec{.element = DType::f8_e4m3fn, .block = {1, 32}, .rule = ScaleRule::mx_floor};
  const Fp8TensorStats s = stats_of(x, spec);
  EXPECT_EQ(s.numel, 128);
  EXPECT_EQ(s.scales, 4);
  EXPECT_EQ(s.scale_min, std::ldexp(1.0f, -10));
  EXPECT_EQ(s.scale_max, 1.0f);
  EXPECT_EQ(s.amax, 500.0f);
  EXPECT_EQ(s.saturated, 2);  // 500, 470
  EXPECT_EQ(s.flushed, 3);    // 1e-4 (/1), +-1e-6 (/2^-8 = 2.6e-4)
  EXPECT_DOUBLE_EQ(s.saturated_fraction(), 2.0 / 128);
}

// e5m2 has inf: a value rounding past 57344 would become inf without saturation.
TEST(Fp8TensorStats, E5m2SaturationIsRoundingToInf) {
  const Tensor x = matrix({kInf, 60000, 62000, 57344, 1e-6, 1}, 2);
  const QuantSpec spec{.element = DType::f8_e5m2, .block = {0, 0}, .rule = ScaleRule::te};
  const Fp8TensorStats s = stats_of(x, spec);
  EXPECT_EQ(s.nonfinite, 1);
  EXPECT_EQ(s.saturated, 1);  // 62000 >= 61440, halfway to 65536; 60000 rounds to 57344
  EXPECT_EQ(s.flushed, 1);    // 1e-6 < 2^-17, half e5m2's smallest subnormal
}

// A strided source (the weight-gradient product's transposed operands) reads as its values.
TEST(Fp8TensorStats, StridedSourcesAndMerging) {
  const Tensor x = mixprec::testing::randn({64, 48}, DType::bf16, 7);
  const QuantSpec spec{.element = DType::f8_e4m3fn, .block = {1, 32}, .rule = ScaleRule::mx_floor};
  const Fp8TensorStats a = stats_of(x.transpose(0, 1), spec);
  const Fp8TensorStats b = stats_of(x.transpose(0, 1).contiguous(), spec);
  EXPECT_EQ(a.numel, b.numel);
  EXPECT_EQ(a.saturated, b.saturated);
  EXPECT_EQ(a.flushed, b.flushed);
  EXPECT_EQ(a.amax, b.amax);
  EXPECT_EQ(a.scale_min, b.scale_min);
  Fp8TensorStats m = a;
  Fp8TensorStats big;
  big.numel = 10, big.amax = 1e6f, big.scale_min = 1e-9f, big.scale_max = 1e9f, big.scales = 1;
  big.saturated = 1, big.flushed = 2, big.nonfinite = 3;
  m.merge(big);
  EXPECT_EQ(m.numel, a.numel + 10);
  EXPECT_EQ(m.amax, 1e6f);
  EXPECT_EQ(m.scale_min, 1e-9f);
  EXPECT_EQ(m.scale_max, 1e9f);
  EXPECT_EQ(m.saturated, a.saturated + 1);
  EXPECT_EQ(m.flushed, a.flushed + 2);
  EXPECT_EQ(m.nonfinite, 3);
  const std::string e = mixprec::testing::error_of(
      [&] { fp8_tensor_stats(x, backend::current().quantize(x.transpose(0, 1), spec)); });
  EXPECT_NE(e.find("same 2-d shape"), std::string::npos) << e;
}

// TE's NVFP4 cast (te_nvfp4): E2M1 has no inf, so "saturated" is a value at or past 7 after
// scaling (rounding to nearest would pass 6). Tensor amax 2688 gives a tensor scale of 1; block 1's
// amax 0.0174 wants a block scale of 0.0029, which E4M3 can only hold as its subnormal 2^-9: the
// block is multiplied by 512, its amax lands at 8.9 (saturated) and 0.0002 at 0.10 (flushed).
TEST(Fp8TensorStats, Nvfp4CountsByTheEncodeScalesAndItsSaturationRule) {
  std::vector<double> v(32, 0.0);
  v[0] = 2688, v[1] = 448, v[16] = 0.0174, v[17] = 0.0002;
  const Tensor x = matrix(v, 1);
  const QuantSpec spec{DType::f4_e2m1fn, {1, 16}, ScaleRule::te_nvfp4};
  const Fp8TensorStats s = stats_of(x, spec);
  EXPECT_EQ(s.numel, 32);
  EXPECT_EQ(s.amax, 2688.0f);
  EXPECT_EQ(s.saturated, 1);
  EXPECT_EQ(s.flushed, 1);
  EXPECT_EQ(s.scale_min, std::ldexp(1.0f, -9));
  EXPECT_EQ(s.scale_max, 448.0f);
}

// With the Hadamard transform the counts are of what the cast saw: the transformed rows (in
// the source's dtype), counted here by hand from the stored bytes.
TEST(Fp8TensorStats, Nvfp4WithTheTransformCountsTheTransformedSource) {
  const Tensor x = mixprec::testing::randn({24, 64}, DType::bf16, 21);
  const QuantSpec spec{DType::f4_e2m1fn, {1, 16}, ScaleRule::te_nvfp4, false, true};
  const backend::Quantized q = backend::current().quantize(x, spec);
  const Fp8TensorStats s = fp8_tensor_stats(x, q);
  const Tensor t = x.to(DType::f32);
  const auto* bytes = static_cast<const uint8_t*>(q.data.raw_data());
  float amax = 0;
  int64_t flushed = 0;
  for (int64_t r = 0; r < 24; ++r) {
    std::vector<float> row(t.data<float>() + r * 64, t.data<float>() + (r + 1) * 64);
    rht16_in(row.data(), 64, DType::bf16);
    for (int64_t c = 0; c < 64; ++c) {
      amax = std::max(amax, std::fabs(row[static_cast<std::size_t>(c)]));
      flushed += row[static_cast<std::size_t>(c)] != 0 && (bytes[r * 64 + c] & 0x7) == 0;
    }
  }
  EXPECT_EQ(s.amax, amax);
  EXPECT_EQ(s.amax, *q.tensor_amax);
  EXPECT_EQ(s.flushed, flushed);
  EXPECT_GT(flushed, 0);
}

}  // namespace
}  // namespace mixprec::amp
