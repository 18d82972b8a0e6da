// The "h100" accumulator against the H100 FP8 wgmma step as two bit-accurate simulators
// describe it (Khattak & Mikaitis, arXiv 2512.07004, models/H100TC.m; MMA-Sim, arXiv
// 2511.10909, fused_sum): the accumulator and 32 products in one step; the reference exponent
// is the largest of the accumulator's and the products' e_a + e_b (product significands left
// in [1, 4)); each term keeps 13 fractional bits below it, truncated toward zero; the exact
// sum is cut toward zero to 14 significant bits. Written here again from that description in
// integer arithmetic (significands and shifts), independently of the model's doubles, and
// compared bit for bit on random E4M3 and E5M2 vectors with subnormals, signs and zeros.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "mixprec/numerics/accumulator_model.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/dtype.h"

namespace mixprec {
namespace {

// x = m · 2^lsb with m an integer (|m| < 2^(mant + 1)) and the exponent the format's
// (clamped at its smallest normal one): e = lsb + mant.
struct Split {
  int64_t m;
  int lsb;
  int exponent;
};

Split split(double x, int mant_bits, int emin) {
  const int e = std::max(std::ilogb(x), emin);
  const int lsb = e - mant_bits;
  return {static_cast<int64_t>(std::ldexp(x, -lsb)), lsb, e};  // exact
}

// m · 2^lsb as a count of 2^unit, truncated toward zero.
__int128 count_toward_zero(int64_t m, int lsb, int unit) {
  const __int128 mag = m < 0 ? -static_cast<__int128>(m) : m;
  const __int128 cut = lsb >= unit ? mag << (lsb - unit) : mag >> (unit - lsb);
  return m < 0 ? -cut : cut;
}

// One fused step: c (an f32 value) plus the products a_k·b_k, both operand formats given.
float h100_step(float c, const std::vector<float>& a, const std::vector<float>& b, int a_mant,
                int a_emin, int b_mant, int b_emin) {
  struct Term {
    int64_t m;
    int lsb, exponent;
  };
  std::vector<Term> terms;
  if (c != 0) {
    const Split s = split(c, 23, -126);
    terms.push_back({s.m, s.lsb, s.exponent});
  }
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k] == 0 || b[k] == 0) continue;
    const Split x = split(a[k], a_mant, a_emin), y = split(b[k], b_mant, b_emin);
    terms.push_back({x.m * y.m, x.lsb + y.lsb, x.exponent + y.exponent});
  }
  if (terms.empty()) return 0.0f;
  int e = terms[0].exponent;
  for (const Term& t : terms) e = std::max(e, t.exponent);
  const int unit = e - 13;
  __int128 sum = 0;
  for (const Term& t : terms) sum += count_toward_zero(t.m, t.lsb, unit);
  if (sum == 0) return 0.0f;
  const bool negative = sum < 0;
  unsigned __int128 mag = negative ? -sum : sum;
  int lsb = unit;
  int width = 0;
  for (unsigned __int128 v = mag; v != 0; v >>= 1) ++width;
  if (width > 14) {
    mag >>= width - 14;
    lsb += width - 14;
  }
  const double v = std::ldexp(static_cast<double>(mag), lsb);
  return static_cast<float>(negative ? -v : v);
}

// Random FP8 values: every byte but NaN (and inf for E5M2), so subnormals and zeros occur.
std::vector<float> random_fp8(DType dtype, std::size_t n, std::mt19937_64& rng) {
  std::vector<float> out;
  while (out.size() < n) {
    const auto byte = static_cast<uint8_t>(rng());
    float v = 0;
    widen_to_f32(dtype, &byte, &v, 1);
    if (std::isfinite(v)) out.push_back(v);
  }
  return out;
}

struct Format {
  DType dtype;
  int mant, emin;
};

TEST(H100Accumulator, OneStepEqualsTheSimulatorsFusedSum) {
  const Format e4m3{DType::f8_e4m3fn, 3, -6}, e5m2{DType::f8_e5m2, 2, -14};
  std::mt19937_64 rng(2512'07004);
  int differ_from_own_exponents = 0;
  for (const auto& [fa, fb] : {std::pair{e4m3, e4m3}, std::pair{e5m2, e4m3}}) {
    for (int trial = 0; trial < 2000; ++trial) {
      const std::vector<float> a = random_fp8(fa.dtype, 32, rng), b = random_fp8(fb.dtype, 32, rng);
      // The accumulator: 0, or a value near the products' scale or far above it.
      const float c = trial % 3 == 0 ? 0.0f
                                     : std::ldexp(static_cast<float>(rng() % 100000) - 5e4f,
                                                  static_cast<int>(rng() % 40) - 20);
      std::vector<double> terms{c};
      std::vector<int> exps{c == 0 ? 0 : std::ilogb(c)};
      for (std::size_t k = 0; k < 32; ++k) {
        terms.push_back(static_cast<double>(a[k]) * b[k]);
        exps.push_back(terms.back() == 0 ? 0 : product_exponent(a[k], fa.emin, b[k], fb.emin));
      }
      const float want = h100_step(c, a, b, fa.mant, fa.emin, fb.mant, fb.emin);
      const double got = aligned_sum(terms, 14, AccumulatorDiscard::toward_zero, exps);
      ASSERT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(static_cast<float>(got)))
          << "trial " << trial << ": c " << c << ", want " << want << ", got " << got;
      if (aligned_sum(terms, 14, AccumulatorDiscard::toward_zero) != got)
        ++differ_from_own_exponents;
    }
  }
  // The operand exponents matter: aligning on the products' own exponents differs sometimes.
  EXPECT_GT(differ_from_own_exponents, 0);
}

TEST(H100Accumulator, AWholeDotIsTheStepsChained) {
  const AccumulatorModel* h100 = find_accumulator("h100", "test");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(find_accumulator("f32", "test"), nullptr);
  EXPECT_STREQ(named_accumulator_of(h100).name, "h100");
  std::mt19937_64 rng(2511'10909);
  for (int trial = 0; trial < 50; ++trial) {
    const std::size_t k = 32 * (1 + rng() % 16) + (trial % 2 == 0 ? 0 : 17);  // a short last step
    const std::vector<float> a = random_fp8(DType::f8_e4m3fn, k, rng);
    const std::vector<float> b = random_fp8(DType::f8_e4m3fn, k, rng);
    std::vector<double> products(k);
    std::vector<int> exps(k);
    for (std::size_t i = 0; i < k; ++i) {
      products[i] = static_cast<double>(a[i]) * b[i];
      exps[i] = products[i] == 0 ? 0 : product_exponent(a[i], -6, b[i], -6);
    }
    float c = 0;
    for (std::size_t k0 = 0; k0 < k; k0 += 32) {
      const std::size_t k1 = std::min(k, k0 + 32);
      c = h100_step(c, {a.begin() + k0, a.begin() + k1}, {b.begin() + k0, b.begin() + k1}, 3, -6, 3,
                    -6);
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(c), std::bit_cast<uint32_t>(model_dot(products, *h100, exps)))
        << "K = " << k;
  }
}

}  // namespace
}  // namespace mixprec
