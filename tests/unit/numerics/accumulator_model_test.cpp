// The GPU accumulator model (accumulator_model.h): exact checks of its mechanics, then the
// experiment behind DeepSeek-V3's figure (K = 4096, max relative error against kept bits,
// with and without promotion to f32 every 128 products), printed as a table.
#include "mixprec/numerics/accumulator_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/convert.h"

namespace mixprec {
namespace {

constexpr AccumulatorDiscard kZero = AccumulatorDiscard::toward_zero;
constexpr AccumulatorDiscard kFloor = AccumulatorDiscard::toward_negative;
constexpr AccumulatorDiscard kNearest = AccumulatorDiscard::nearest_even;

double sum_of(std::vector<double> terms, int kept_bits, AccumulatorDiscard d) {
  return aligned_sum(terms, kept_bits, d);
}

// ---- mechanics, exactly ----

TEST(AccumulatorModel, AlignsToTheLargestExponentAndKeepsThatManyBits) {
  // Unit of the aligned sum = 2^(0 - 14 + 1) = 2^-13: 2^-13 survives, 2^-14 does not.
  EXPECT_EQ(sum_of({1.0, 0x1p-13}, 14, kZero), 1.0 + 0x1p-13);
  EXPECT_EQ(sum_of({1.0, 0x1p-14}, 14, kZero), 1.0);
  EXPECT_EQ(sum_of({1.0, 0x1p-14}, 15, kZero), 1.0 + 0x1p-14);
  // The largest term sets the unit whichever position it has.
  EXPECT_EQ(sum_of({0x1p-14, 0x1p-14, 1.0}, 14, kZero), 1.0);
  // Small terms alone keep their own bits: nothing large to align to.
  EXPECT_EQ(sum_of({0x1p-14, 0x1p-14}, 14, kZero), 0x1p-13);
}

TEST(AccumulatorModel, DiscardModesDifferOnTheCutBits) {
  const double three_quarters_unit = 3 * 0x1p-15;  // 0.75 of the unit 2^-13
  EXPECT_EQ(sum_of({1.0, three_quarters_unit}, 14, kZero), 1.0);
  EXPECT_EQ(sum_of({1.0, three_quarters_unit}, 14, kFloor), 1.0);
  EXPECT_EQ(sum_of({1.0, three_quarters_unit}, 14, kNearest), 1.0 + 0x1p-13);
  // Negative cut bits: toward zero drops them, floor (sign-fill shift) takes a whole unit.
  EXPECT_EQ(sum_of({1.0, -0x1p-15}, 14, kZero), 1.0);
  EXPECT_EQ(sum_of({1.0, -0x1p-15}, 14, kFloor), 1.0 - 0x1p-13);
  EXPECT_EQ(sum_of({1.0, -0x1p-15}, 14, kNearest), 1.0);
  // Ties go to even: half a unit rounds to 0 units, one and a half to 2.
  EXPECT_EQ(sum_of({1.0, 0x1p-14}, 14, kNearest), 1.0);
  EXPECT_EQ(sum_of({1.0, 3 * 0x1p-14}, 14, kNearest), 1.0 + 0x1p-12);
  // A whole negative sum: toward zero shrinks the magnitude, floor grows it.
  EXPECT_EQ(sum_of({-1.0, -three_quarters_unit}, 14, kZero), -1.0);
  EXPECT_EQ(sum_of({-1.0, -three_quarters_unit}, 14, kFloor), -1.0 - 0x1p-13);
}

TEST(AccumulatorModel, TheSumIsCutBackToKeptBitsAfterACarry) {
  // Terms of 1.75 (3 bits, unit 2^-2): four sum to 7, which 3 bits hold; five to 8.75, which
  // is cut back to 3 significant bits (unit 2): 8.
  EXPECT_EQ(sum_of({1.75, 1.75, 1.75, 1.75}, 3, kZero), 7.0);
  EXPECT_EQ(sum_of({1.75, 1.75, 1.75, 1.75, 1.75}, 3, kZero), 8.0);
  EXPECT_EQ(sum_of({1.75, 1.75, 1.75, 1.75, 1.75}, 3, kNearest), 8.0);
  // Six of them and 0.5 make 11 = 5.5 units of 2: a tie, to even 12; truncated 10.
  const std::vector<double> eleven = {1.75, 1.75, 1.75, 1.75, 1.75, 1.75, 0.5};
  EXPECT_EQ(aligned_sum(eleven, 3, kNearest), 12.0);
  EXPECT_EQ(aligned_sum(eleven, 3, kZero), 10.0);
  // 9 = 4.5 units of 2: a tie, to even 8.
  EXPECT_EQ(sum_of({1.75, 1.75, 1.75, 1.75, 0.5, 0.5, 0.5, 0.5}, 3, kNearest), 8.0);
  // Negative: -8.75 cut to 3 bits is -8 toward zero, -10 by floor.
  EXPECT_EQ(sum_of({-1.75, -1.75, -1.75, -1.75, -1.75}, 3, kZero), -8.0);
  EXPECT_EQ(sum_of({-1.75, -1.75, -1.75, -1.75, -1.75}, 3, kFloor), -10.0);
}

TEST(AccumulatorModel, ZerosNaNAndInfinity) {
  EXPECT_EQ(sum_of({0.0, 0.0}, 14, kZero), 0.0);
  EXPECT_TRUE(std::isnan(sum_of({1.0, std::nan("")}, 14, kZero)));
  EXPECT_EQ(sum_of({1.0, std::numeric_limits<double>::infinity()}, 14, kZero),
            std::numeric_limits<double>::infinity());
}

std::vector<double> repeat(double v, int n) {
  return std::vector<double>(n, v);
}

std::vector<double> concat(std::vector<double> a, const std::vector<double>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(AccumulatorModel, PromotionEmptiesThePartialSumAtTheBoundary) {
  // 32 ones make the partial sum 32 = 2^5; the next 32 products of 2^-10 are each a quarter of
  // its unit 2^(5-13) and vanish, unless the partial sum was promoted to f32 in between.
  const std::vector<double> p = concat(repeat(1.0, 32), repeat(0x1p-10, 32));
  AccumulatorModel m;  // 14 bits, groups of 32, aligned with the accumulator, toward zero
  m.promote_every = 0;
  EXPECT_EQ(model_dot(p, m), 32.0f);
  m.promote_every = 32;
  EXPECT_EQ(model_dot(p, m), 32.0f + 0x1p-5f);
  m.promote_every = 64;  // no boundary between the two groups
  EXPECT_EQ(model_dot(p, m), 32.0f);
  m.promote_every = 128;  // longer than the product list: one promotion, at the end
  EXPECT_EQ(model_dot(p, m), 32.0f);
}

TEST(AccumulatorModel, GroupSizeDecidesWhichProductsAreAlignedTogether) {
  // 1 - 1 cancels; two tiny products in the same step as the ones are cut away, in a later
  // step (partial sum 0) they are kept.
  const std::vector<double> p = {1.0, -1.0, 0x1p-20, 0x1p-20};
  AccumulatorModel m;
  m.group_size = 4;
  EXPECT_EQ(model_dot(p, m), 0.0f);
  m.group_size = 2;
  EXPECT_EQ(model_dot(p, m), 0x1p-19f);
}

TEST(AccumulatorModel, AlignmentWithTheAccumulatorIsAChoice) {
  // A partial sum of 32, then one step of 32 products of 2^-10 (sum 2^-5): aligned with the
  // accumulator, each is cut to nothing; aligned only among themselves, their sum 2^-5 is
  // exact and survives the add to 32 (unit 2^-8).
  const std::vector<double> p = concat(repeat(1.0, 32), repeat(0x1p-10, 32));
  AccumulatorModel m;
  m.align_with_accumulator = true;
  EXPECT_EQ(model_dot(p, m), 32.0f);
  m.align_with_accumulator = false;
  EXPECT_EQ(model_dot(p, m), 32.0f + 0x1p-5f);
}

TEST(AccumulatorModel, WideKeptBitsAreTheExactSumRoundedOnce) {
  std::mt19937_64 rng(3);
  std::vector<double> p(300);
  for (double& v : p) v = std::ldexp(static_cast<double>(rng() >> 56) - 128, -3);  // 8 bits
  double exact = 0;
  for (double v : p) exact += v;  // exact: small integers times 2^-3
  AccumulatorModel m;
  m.kept_bits = 40;
  EXPECT_EQ(model_dot(p, m), static_cast<float>(exact));
}

TEST(AccumulatorModel, BadParametersNameTheField) {
  auto message_of = [](const AccumulatorModel& m) {
    try {
      check_accumulator_model(m, "accumulator");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  AccumulatorModel m;
  m.promote_every = 100;
  EXPECT_NE(message_of(m).find("promote_every = 100 is not a multiple of group_size = 32"),
            std::string::npos);
  m = {};
  m.kept_bits = 1;
  EXPECT_NE(message_of(m).find("kept_bits = 1"), std::string::npos);
  m = {};
  m.group_size = 0;
  EXPECT_NE(message_of(m).find("group_size = 0"), std::string::npos);
  EXPECT_EQ(message_of(AccumulatorModel{}), "no error");
  EXPECT_THROW(model_matmul_abt(std::vector<float>(3), std::vector<float>(4), 2, 2, 2, {}), Error);
}

// ---- DeepSeek-V3's figure ----

constexpr int64_t kK = 4096;
constexpr int64_t kRows = 8;  // an 8×8 output: the errors are systematic, 64 elements suffice

struct Operands {
  const char* name;
  std::vector<float> a, b;
};

// Uniform [0,1) and standard normal from mt19937_64's specified bits (not from the standard
// library's distributions, whose algorithms differ between implementations).
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1p-53;
}
double normal01(std::mt19937_64& rng) {
  const double u = 1.0 - uniform01(rng), v = uniform01(rng);
  return std::sqrt(-2 * std::log(u)) * std::cos(6.283185307179586 * v);
}

// E4M3 with a per-tensor scale (torchao's tensorwise: 448 / amax), kept as the E4M3 values:
// the scale is applied after the GEMM and does not change relative errors.
std::vector<float> to_e4m3_tensorwise(const std::vector<float>& x) {
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  std::vector<float> scaled(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) scaled[i] = x[i] * (448.0f / amax);
  std::vector<uint8_t> bytes(x.size());
  ConvertOptions opts;
  opts.saturate = true;
  convert_from_f32(scaled.data(), DType::f8_e4m3fn, bytes.data(), x.size(), opts);
  std::vector<float> out(x.size());
  widen_to_f32(DType::f8_e4m3fn, bytes.data(), out.data(), x.size());
  return out;
}

std::vector<Operands> operand_sets() {
  std::mt19937_64 rng(2412'19437);
  auto draw = [&](bool normal) {
    std::vector<float> v(kRows * kK);
    for (float& x : v) x = static_cast<float>(normal ? normal01(rng) : uniform01(rng));
    return v;
  };
  std::vector<Operands> sets;
  sets.push_back(
      {"U(0,1) -> E4M3", to_e4m3_tensorwise(draw(false)), to_e4m3_tensorwise(draw(false))});
  sets.push_back(
      {"N(0,1) -> E4M3", to_e4m3_tensorwise(draw(true)), to_e4m3_tensorwise(draw(true))});
  sets.push_back({"U(0,1) f32", draw(false), draw(false)});
  sets.push_back({"N(0,1) f32", draw(true), draw(true)});
  return sets;
}

// max over the outputs of |c - exact| / sum_k |a_k b_k|: the plain relative error when all
// products share a sign (U(0,1)), and the scale summation error is bounded against when they
// do not (N(0,1) outputs near zero would make |c - exact| / |exact| unbounded).
double max_relative_error(const Operands& ops, const std::vector<float>& c) {
  double worst = 0;
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kRows; ++j) {
      double exact = 0, magnitude = 0;
      for (int64_t k = 0; k < kK; ++k) {
        const double p = static_cast<double>(ops.a[i * kK + k]) * ops.b[j * kK + k];
        exact += p;  // f64: 4096 products of <= 48 bits, error far below the f32 figures
        magnitude += std::fabs(p);
      }
      worst = std::max(worst, std::fabs(c[i * kRows + j] - exact) / magnitude);
    }
  return worst;
}

// Plain sequential f32 accumulation (mixprec's default "off"), for comparison.
std::vector<float> f32_matmul_abt(const Operands& ops) {
  std::vector<float> c(kRows * kRows);
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kRows; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < kK; ++k) acc += ops.a[i * kK + k] * ops.b[j * kK + k];
      c[i * kRows + j] = acc;
    }
  return c;
}

// The model with each product aligned by its operands' exponent sum, as the H100 does
// (h100_accumulator_test): E4M3 values clamp at its smallest normal exponent, f32 at f32's.
std::vector<float> model_with_operand_exponents(const Operands& ops, const AccumulatorModel& m) {
  const int emin = std::string(ops.name).find("E4M3") != std::string::npos ? -6 : -126;
  std::vector<float> c(kRows * kRows);
  std::vector<double> products(kK);
  std::vector<int> exps(kK);
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kRows; ++j) {
      for (int64_t k = 0; k < kK; ++k) {
        const float x = ops.a[i * kK + k], y = ops.b[j * kK + k];
        products[k] = static_cast<double>(x) * y;
        exps[k] = products[k] == 0 ? 0 : product_exponent(x, emin, y, emin);
      }
      c[i * kRows + j] = model_dot(products, m, exps);
    }
  return c;
}

double model_error(const Operands& ops, AccumulatorModel m) {
  return max_relative_error(ops, model_with_operand_exponents(ops, m));
}

// max over the outputs of |c - exact| / |exact| (for signed operands a few outputs near zero
// dominate it: the reading of "relative error" that a plain test of two random matrices gives).
double max_error_of_result(const Operands& ops, const std::vector<float>& c) {
  double worst = 0;
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kRows; ++j) {
      double exact = 0;
      for (int64_t k = 0; k < kK; ++k)
        exact += static_cast<double>(ops.a[i * kK + k]) * ops.b[j * kK + k];
      worst = std::max(worst, std::fabs(c[i * kRows + j] - exact) / std::fabs(exact));
    }
  return worst;
}

TEST(AccumulatorModelExperiment, DeepSeekV3Figure) {
  const std::vector<Operands> sets = operand_sets();
  const double f32_bound = kK * 0x1p-24;  // the a-priori bound of f32 summation, K·u
  std::printf("K = %lld, %lldx%lld outputs, max_ij |c - exact| / sum_k |a_k b_k|\n",
              static_cast<long long>(kK), static_cast<long long>(kRows),
              static_cast<long long>(kRows));
  std::printf(
      "model: groups of 32, aligned with the accumulator on the operands' exponents, toward "
      "zero\n");
  std::printf("%-16s %-9s %9s %9s %9s %9s %9s   f32 plain\n", "operands", "promote", "12 bits",
              "13 bits", "14 bits", "15 bits", "16 bits");
  for (const Operands& ops : sets) {
    const double f32_error = max_relative_error(ops, f32_matmul_abt(ops));
    double never[17] = {}, every128[17] = {};
    for (int promote : {0, 128}) {
      std::printf("%-16s %-9s", ops.name, promote == 0 ? "never" : "every 128");
      for (int bits = 12; bits <= 16; ++bits) {
        AccumulatorModel m = hopper_fp8_fast_accum_model();
        m.kept_bits = bits;
        m.promote_every = promote;
        const double e = model_error(ops, m);
        (promote == 0 ? never : every128)[bits] = e;
        std::printf(" %9.2e", e);
      }
      std::printf("   %9.2e\n", f32_error);
    }
    SCOPED_TRACE(ops.name);
    // Same-sign products add their truncation errors (2x per bit, 32x less with promotion, in
    // theory); signed ones partly cancel them, so their margins are looser.
    const bool same_sign = ops.name[0] == 'U';
    for (int bits = 12; bits <= 14; ++bits) {
      // Fewer bits, more error.
      if (same_sign) {
        EXPECT_GT(never[bits], 1.5 * never[bits + 1]) << bits << " bits";
      }
      EXPECT_GT(never[bits], 2 * never[bits + 2]) << bits << " bits";
    }
    for (int bits = 12; bits <= 16; ++bits) {
      // Promotion every 128 products helps.
      EXPECT_LT((same_sign ? 10 : 3) * every128[bits], never[bits]) << bits << " bits";
    }
    // The truncation is far from f32: plain f32 accumulation is at least 10x better.
    EXPECT_LT(10 * f32_error, every128[14]);
  }
  // On FP8 operands promotion every 128 brings 14 bits to f32 level in the sense of the f32
  // summation bound K·u (plain f32's observed error is far smaller: it rounds to nearest and
  // its errors cancel, truncation's add up).
  for (const Operands& ops : {sets[0], sets[1]}) {
    SCOPED_TRACE(ops.name);
    EXPECT_LT(model_error(ops, deepseek_promoted_model()), 4 * f32_bound);
  }
  // The documented setting on U(0,1) -> E4M3 at 14 bits, and the kept bits that land on 2%.
  const double documented = model_error(sets[0], hopper_fp8_fast_accum_model());
  AccumulatorModel wider = hopper_fp8_fast_accum_model();
  wider.kept_bits = 16;
  const double at16 = model_error(sets[0], wider);
  AccumulatorModel separate = hopper_fp8_fast_accum_model();
  separate.align_with_accumulator = false;
  const double separate14 = model_error(sets[0], separate);
  std::printf(
      "U(0,1) -> E4M3, no promotion: documented (14 bits) %.2e, 16 bits %.2e, "
      "14 bits not aligned with the accumulator %.2e\n",
      documented, at16, separate14);
  // The same H100 model against |exact| per output, on both operand kinds.
  for (const Operands& ops : {sets[0], sets[1]}) {
    const double fast =
        max_error_of_result(ops, model_with_operand_exponents(ops, hopper_fp8_fast_accum_model()));
    const double promoted =
        max_error_of_result(ops, model_with_operand_exponents(ops, deepseek_promoted_model()));
    std::printf("%s, max |c - exact| / |exact|: h100 %.2e, promoted every 128 %.2e\n", ops.name,
                fast, promoted);
    // DeepSeek-V3's test of two random matrices: zero-mean operands land "near 2%".
    if (ops.name[0] == 'N') {
      EXPECT_GT(fast, 0.005) << ops.name;
      EXPECT_LT(fast, 0.04) << ops.name;
      EXPECT_LT(3 * promoted, fast) << ops.name;
    }
  }
  EXPECT_GT(documented, 0.02);  // above DeepSeek's 2%...
  EXPECT_LT(documented, 0.10);  // ...within a factor 5
  EXPECT_GT(at16, 0.01);        // 16 kept bits: within a factor 2 of 2%
  EXPECT_LT(at16, 0.04);
  EXPECT_LT(separate14, 0.01);  // the other reading of the alignment falls below it
}

}  // namespace
}  // namespace mixprec
