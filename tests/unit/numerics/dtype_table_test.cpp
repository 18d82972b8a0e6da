// The dtype table against the published constants of each format (IEEE 754, the bfloat16
// definition, the OCP FP8 spec), and the promotion rule.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <memory>

#include "mixprec/core/error.h"
#include "mixprec/cpu/elementwise.h"
#include "mixprec/cpu/softmax.h"
#include "mixprec/dist/communicator.h"
#include "mixprec/numerics/dtype.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {
namespace {

struct Published {
  DType dtype;
  int size, exp_bits, mant_bits, bias;
  double max, min_normal, min_subnormal, eps;
  bool has_inf;
};

// Constants as printed in the specs (and numerics.md), written out, not computed.
const Published kPublished[] = {
    {DType::f64, 8, 11, 52, 1023, DBL_MAX, DBL_MIN, 4.9406564584124654e-324, DBL_EPSILON, true},
    {DType::f32, 4, 8, 23, 127, 3.4028234663852886e38, 1.1754943508222875e-38,
     1.401298464324817e-45, 1.1920928955078125e-07, true},
    {DType::bf16, 2, 8, 7, 127, 3.3895313892515355e38, 1.1754943508222875e-38,
     9.183549615799121e-41, 0.0078125, true},
    {DType::f16, 2, 5, 10, 15, 65504.0, 6.103515625e-05, 5.960464477539063e-08, 0.0009765625, true},
    {DType::f8_e4m3fn, 1, 4, 3, 7, 448.0, 0.015625, 0.001953125, 0.125, false},
    {DType::f8_e5m2, 1, 5, 2, 15, 57344.0, 6.103515625e-05, 1.52587890625e-05, 0.25, true},
};

TEST(DTypeTable, FloatingFormatsMatchPublishedConstants) {
  for (const Published& p : kPublished) {
    SCOPED_TRACE(dtype_name(p.dtype));
    const DTypeInfo& row = info(p.dtype);
    ASSERT_NE(row.format, nullptr);
    const FloatFormat& f = *row.format;
    EXPECT_EQ(row.size, p.size);
    EXPECT_EQ(f.total_bits(), 8 * p.size);
    EXPECT_EQ(f.exp_bits, p.exp_bits);
    EXPECT_EQ(f.mant_bits, p.mant_bits);
    EXPECT_EQ(f.bias, p.bias);
    EXPECT_EQ(max_finite(f), p.max);
    EXPECT_EQ(min_normal(f), p.min_normal);
    EXPECT_EQ(min_subnormal(f), p.min_subnormal);
    EXPECT_EQ(epsilon(f), p.eps);
    EXPECT_EQ(f.has_inf, p.has_inf);
  }
}

TEST(DTypeTable, MaxFiniteEncodingsAreTheKnownBitPatterns) {
  EXPECT_EQ(kFormatBF16.max_finite_bits(), 0x7F7Fu);
  EXPECT_EQ(kFormatF16.max_finite_bits(), 0x7BFFu);
  EXPECT_EQ(kFormatE4M3FN.max_finite_bits(), 0x7Eu);
  EXPECT_EQ(kFormatE5M2.max_finite_bits(), 0x7Bu);
  EXPECT_EQ(kFormatE5M2.inf_bits(), 0x7Cu);
  EXPECT_TRUE(kFormatE4M3FN.is_nan(0x7F));
  EXPECT_TRUE(kFormatE4M3FN.is_nan(0xFF));
  EXPECT_FALSE(kFormatE4M3FN.is_nan(0x7E));
  EXPECT_FALSE(kFormatE4M3FN.is_inf(0x78));  // all-ones exponent is finite (256) in e4m3fn
  EXPECT_TRUE(kFormatE5M2.is_nan(0x7D));
  EXPECT_TRUE(kFormatE5M2.is_inf(0xFC));
}

TEST(DTypeTable, IntegerTypesHaveNoFormat) {
  EXPECT_EQ(info(DType::i32).format, nullptr);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_EQ(dtype_size(DType::u8), 1u);
  EXPECT_EQ(dtype_size(DType::boolean), 1u);
  EXPECT_FALSE(is_floating(DType::i64));
}

TEST(DTypeTable, ParsesNamesAndAliasesCaseInsensitively) {
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("Float16"), DType::f16);
  EXPECT_EQ(parse_dtype("half"), DType::f16);
  EXPECT_EQ(parse_dtype("e4m3"), DType::f8_e4m3fn);
  EXPECT_EQ(parse_dtype("float8_e5m2"), DType::f8_e5m2);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_EQ(parse_dtype("int64"), DType::i64);
  EXPECT_EQ(parse_dtype("bool"), DType::boolean);
}

TEST(DTypeTable, UnknownNameErrorListsValidNames) {
  try {
    parse_dtype("bf17");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'bf17'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f8_e4m3fn"), std::string::npos) << msg;
  }
}

TEST(DTypePromotion, FollowsTheDocumentedLattice) {
  EXPECT_EQ(promote(DType::bf16, DType::bf16), DType::bf16);
  EXPECT_EQ(promote(DType::bf16, DType::f32), DType::f32);
  EXPECT_EQ(promote(DType::f16, DType::f32), DType::f32);
  EXPECT_EQ(promote(DType::bf16, DType::f16), DType::f32);  // neither holds the other
  EXPECT_EQ(promote(DType::f8_e4m3fn, DType::f8_e5m2), DType::f16);
  EXPECT_EQ(promote(DType::f8_e4m3fn, DType::bf16), DType::bf16);
  EXPECT_EQ(promote(DType::f8_e5m2, DType::f16), DType::f16);
  EXPECT_EQ(promote(DType::f32, DType::f64), DType::f64);
  EXPECT_EQ(promote(DType::i64, DType::bf16), DType::bf16);  // int + float -> the float
  EXPECT_EQ(promote(DType::i32, DType::f32), DType::f32);
  EXPECT_EQ(promote(DType::boolean, DType::u8), DType::u8);
  EXPECT_EQ(promote(DType::u8, DType::i32), DType::i32);
  EXPECT_EQ(promote(DType::i32, DType::i64), DType::i64);
}

TEST(DTypePromotion, IsSymmetricForEveryPair) {
  for (const DTypeInfo& a : kDTypeTable)
    for (const DTypeInfo& b : kDTypeTable)
      EXPECT_EQ(promote(a.dtype, b.dtype), promote(b.dtype, a.dtype)) << a.name << " + " << b.name;
}

TEST(DTypePromotion, ResultHoldsBothFloatOperandsExactly) {
  for (const DTypeInfo& a : kDTypeTable)
    for (const DTypeInfo& b : kDTypeTable) {
      if (!a.format || !b.format) continue;
      const DType r = promote(a.dtype, b.dtype);
      EXPECT_TRUE(represents_exactly(r, a.dtype)) << a.name << " + " << b.name;
      EXPECT_TRUE(represents_exactly(r, b.dtype)) << a.name << " + " << b.name;
    }
}

}  // namespace
}  // namespace mixprec

namespace mixprec {
namespace {

// The table's compute columns against what the code does with each dtype: the elementwise
// kernel accepts exactly the computable dtypes, a softmax row sums in the accumulate dtype
// (its log-sum-exp statistics come back in it), and the communicator reduces exactly the
// reducible ones.
TEST(DTypeTable, ComputeColumnsMatchTheKernelsAndTheCommunicator) {
  const std::unique_ptr<dist::Communicator> comm = dist::make_single_process_communicator();
  for (const DTypeInfo& row : kDTypeTable) {
    SCOPED_TRACE(row.name);
    const Tensor t = Tensor::zeros({4}, row.dtype);
    bool computes = true;
    try {
      cpu::scale(t, 2.0, row.dtype);
    } catch (const Error&) {
      computes = false;
    }
    EXPECT_EQ(computes, row.computable);
    if (row.computable) {
      cpu::SoftmaxStats stats;
      cpu::softmax_lastdim(t.reshape({1, 4}), /*log=*/false, &stats);
      EXPECT_EQ(stats.log_sum.dtype(), row.accumulate);
    }
    Tensor buffer = Tensor::zeros({4}, row.dtype);
    bool reduces = true;
    try {
      comm->all_reduce(buffer);
    } catch (const Error&) {
      reduces = false;
    }
    EXPECT_EQ(reduces, row.reducible);
  }
}

}  // namespace
}  // namespace mixprec
