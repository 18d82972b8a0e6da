// Tensor::to / copy_from between dtypes: every pair against a hand-computed table, single
// rounding from f64 (and from i64), narrow->narrow, stochastic rounding, and agreement with
// the scalar reference encoder.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/philox.h"
#include "mixprec/tensor/dispatch.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

constexpr std::array<DType, kNumDTypes> kAllDTypes = {
    DType::f64, DType::f32, DType::bf16, DType::f16,     DType::f8_e4m3fn, DType::f8_e5m2,
    DType::i32, DType::i64, DType::u8,   DType::boolean, DType::f4_e2m1fn};

// One input value and, worked out by hand, what converting it to each dtype must give:
// floats round to nearest even once (overflow -> inf, or NaN for e4m3fn, which has no inf),
// integers truncate toward zero and saturate, NaN -> 0, bool is x != 0 (NaN -> true, as in
// C++, NumPy and PyTorch).
struct Row {
  double value;
  double f64, f32, bf16, f16, e4m3, e5m2;
  int64_t i32, i64, u8;
  bool b;
  // E2M1 (0, 0.5, 1, 1.5, 2, 3, 4, 6): no inf or NaN, so overflow, infinities and NaN give 6.
  double e2m1;
};

// clang-format off
const std::vector<Row> kRows = {
  //  value               f64                f32              bf16             f16              e4m3         e5m2         i32       i64                    u8   bool  e2m1
  {0.0,                   0.0,               0.0,             0.0,             0.0,             0.0,         0.0,         0,        0,                     0,   false, 0.0},
  {-0.0,                  -0.0,              -0.0,            -0.0,            -0.0,            -0.0,        -0.0,        0,        0,                     0,   false, -0.0},
  {1.0,                   1.0,               1.0,             1.0,             1.0,             1.0,         1.0,         1,        1,                     1,   true, 1.0},
  {-2.0,                  -2.0,              -2.0,            -2.0,            -2.0,            -2.0,        -2.0,        -2,       -2,                    0,   true, -2.0},
  {2.5,                   2.5,               2.5,             2.5,             2.5,             2.5,         2.5,         2,        2,                     2,   true, 2.0},
  // 1.011b x 2: e5m2 keeps 2 bits, a tie between 1.01 (odd) and 1.10 -> 3.
  {-2.75,                 -2.75,             -2.75,           -2.75,           -2.75,           -2.75,       -3.0,        -2,       -2,                    0,   true, -3.0},
  // 1.1111111b x 2^7: fp8 formats round up to 2^8.
  {255.0,                 255.0,             255.0,           255.0,           255.0,           256.0,       256.0,       255,      255,                   255, true, 6.0},
  // 1.00101100b x 2^8: e4m3 -> 1.001 (288), e5m2 -> 1.01 (320).
  {300.0,                 300.0,             300.0,           300.0,           300.0,           288.0,       320.0,       300,      300,                   255, true, 6.0},
  // Above e4m3's 448: NaN. e5m2: 1.11|1101 x 2^9 -> 1024.
  {1000.0,                1000.0,            1000.0,          1000.0,          1000.0,          kNaN,        1024.0,      1000,     1000,                  255, true, 6.0},
  {448.0,                 448.0,             448.0,           448.0,           448.0,           448.0,       448.0,       448,      448,                   255, true, 6.0},
  // 1.1101b x 2^8: e4m3 tie -> 1.110 (448, even); e5m2 below half -> 448.
  {464.0,                 464.0,             464.0,           464.0,           464.0,           448.0,       448.0,       464,      464,                   255, true, 6.0},
  // 1.111b x 2^8 would be e4m3fn's NaN encoding 0x7F: overflow. e5m2 tie 1.11 -> 2^9.
  {480.0,                 480.0,             480.0,           480.0,           480.0,           kNaN,        512.0,       480,      480,                   255, true, 6.0},
  // f16 max is 65504 (odd); 65520 is the tie with 65536 -> inf. bf16 rounds up to 2^16.
  {65520.0,               65520.0,           65520.0,         65536.0,         kInf,            kNaN,        kInf,        65520,    65520,                 255, true, 6.0},
  {65504.0,               65504.0,           65504.0,         65536.0,         65504.0,         kNaN,        kInf,        65504,    65504,                 255, true, 6.0},
  // 0.1 = 0x1.999999999999ap-4: f32 0x1.99999ap-4, bf16 0x1.9ap-4, f16 0x1.998p-4,
  // e4m3 1.100|11 -> 1.101, e5m2 1.10|011 -> 1.10.
  {0.1,                   0.1,               0x1.99999ap-4,   0x1.9ap-4,       0x1.998p-4,      0x1.ap-4,    0x1.8p-4,    0,        0,                     0,   true, 0.0},
  {kNaN,                  kNaN,              kNaN,            kNaN,            kNaN,            kNaN,        kNaN,        0,        0,                     0,   true, 6.0},
  {kInf,                  kInf,              kInf,            kInf,            kInf,            kNaN,        kInf,        kI32Max,  kI64Max,               255, true, 6.0},
  {-kInf,                 -kInf,             -kInf,           -kInf,           -kInf,           kNaN,        -kInf,       kI32Min,  kI64Min,               0,   true, -6.0},
  // 3e9 = 0xB2D05E00 = 1.0110010|1101... x 2^31: bf16 rounds up to 179 x 2^24.
  {3e9,                   3e9,               3e9,             3003121664.0,    kInf,            kNaN,        kInf,        kI32Max,  3000000000,            255, true, 6.0},
  {-3e9,                  -3e9,              -3e9,            -3003121664.0,   -kInf,           kNaN,        -kInf,       kI32Min,  -3000000000,           0,   true, -6.0},
  // 2^24 + 1: f32 tie -> 2^24 (even). 2^24 + 3: f32 tie -> 2^24 + 4 (even), not truncation.
  {16777217.0,            16777217.0,        16777216.0,      16777216.0,      kInf,            kNaN,        kInf,        16777217, 16777217,              255, true, 6.0},
  {16777219.0,            16777219.0,        16777220.0,      16777216.0,      kInf,            kNaN,        kInf,        16777219, 16777219,              255, true, 6.0},
  // 2^63 - 1024 is the largest double below 2^63: exact in i64, 2^63 in f32/bf16.
  {0x1.fffffffffffffp62,  0x1.fffffffffffffp62, 0x1p63,       0x1p63,          kInf,            kNaN,        kInf,        kI32Max,  9223372036854774784,   255, true, 6.0},
  // 2^63 itself does not fit in i64: saturates.
  {0x1p63,                0x1p63,            0x1p63,          0x1p63,          kInf,            kNaN,        kInf,        kI32Max,  kI64Max,               255, true, 6.0},
  // bf16 ties: 1 + 2^-8 -> 1 (even); 1 + 3 x 2^-8 -> 1 + 2^-6 (even).
  {1.0 + 0x1p-8,          1.0 + 0x1p-8,      1.0 + 0x1p-8,    1.0,             1.0 + 0x1p-8,    1.0,         1.0,         1,        1,                     1,   true, 1.0},
  {1.0 + 0x3p-8,          1.0 + 0x3p-8,      1.0 + 0x3p-8,    1.0 + 0x1p-6,    1.0 + 0x3p-8,    1.0,         1.0,         1,        1,                     1,   true, 1.0},
  // Just above the bf16 tie, by less than half an f32 ulp: via f32 it would land on the tie
  // and go to 1; one rounding gives 1 + 2^-7. f16 keeps 1 + 2^-8 (its ulp is 2^-10).
  {1.0 + 0x1p-8 + 0x1p-40, 1.0 + 0x1p-8 + 0x1p-40, 1.0 + 0x1p-8, 1.0 + 0x1p-7,  1.0 + 0x1p-8,    1.0,         1.0,         1,        1,                     1,   true, 1.0},
  // Subnormals. e4m3: smallest 2^-9; 1.5 x 2^-10 = 0.75 quanta -> 2^-9; 2^-10 is the tie
  // with 0 -> +0; 5 x 2^-9 is exact (mantissa 101); 4.25 x 2^-9 -> 2^-7.
  {0x1p-9,                0x1p-9,            0x1p-9,          0x1p-9,          0x1p-9,          0x1p-9,      0x1p-9,      0,        0,                     0,   true, 0.0},
  {0x1.8p-10,             0x1.8p-10,         0x1.8p-10,       0x1.8p-10,       0x1.8p-10,       0x1p-9,      0x1.8p-10,   0,        0,                     0,   true, 0.0},
  {0x1p-10,               0x1p-10,           0x1p-10,         0x1p-10,         0x1p-10,         0.0,         0x1p-10,     0,        0,                     0,   true, 0.0},
  {-0x1p-10,              -0x1p-10,          -0x1p-10,        -0x1p-10,        -0x1p-10,        -0.0,        -0x1p-10,    0,        0,                     0,   true, -0.0},
  {0x1.4p-7,              0x1.4p-7,          0x1.4p-7,        0x1.4p-7,        0x1.4p-7,        0x1.4p-7,    0x1.4p-7,    0,        0,                     0,   true, 0.0},
  {0x1.1p-7,              0x1.1p-7,          0x1.1p-7,        0x1.1p-7,        0x1.1p-7,        0x1p-7,      0x1p-7,      0,        0,                     0,   true, 0.0},
  // f16: smallest subnormal 2^-24; 2^-25 is the tie with 0 (-> signed 0); 1.5 x 2^-25 -> 2^-24.
  // e5m2's smallest is 2^-16, e4m3's 2^-9: both flush these to (signed) zero by rounding.
  {0x1p-24,               0x1p-24,           0x1p-24,         0x1p-24,         0x1p-24,         0.0,         0.0,         0,        0,                     0,   true, 0.0},
  {0x1.8p-25,             0x1.8p-25,         0x1.8p-25,       0x1.8p-25,       0x1p-24,         0.0,         0.0,         0,        0,                     0,   true, 0.0},
  {-0x1p-25,              -0x1p-25,          -0x1p-25,        -0x1p-25,        -0.0,            -0.0,        -0.0,        0,        0,                     0,   true, -0.0},
  // e5m2 near its max 57344 = 1.11b x 2^15; 61440 = 1.111b x 2^15 is the tie -> 2^16 -> inf.
  {57344.0,               57344.0,           57344.0,         57344.0,         57344.0,         kNaN,        57344.0,     57344,    57344,                 255, true, 6.0},
  {61440.0,               61440.0,           61440.0,         61440.0,         61440.0,         kNaN,        kInf,        61440,    61440,                 255, true, 6.0},
  // Fractions truncate toward zero for integers; u8 clamps negatives to 0.
  {-0.75,                 -0.75,             -0.75,           -0.75,           -0.75,           -0.75,       -0.75,       0,        0,                     0,   true, -1.0},
  {200.5,                 200.5,             200.5,           200.0,           200.5,           208.0,       192.0,       200,      200,                   200, true, 6.0},
};
// clang-format on

double expected_float(const Row& r, DType d) {
  switch (d) {
    case DType::f64:
      return r.f64;
    case DType::f32:
      return r.f32;
    case DType::bf16:
      return r.bf16;
    case DType::f16:
      return r.f16;
    case DType::f8_e4m3fn:
      return r.e4m3;
    case DType::f8_e5m2:
      return r.e5m2;
    case DType::f4_e2m1fn:
      return r.e2m1;
    default:
      ADD_FAILURE() << "not a float dtype";
      return 0;
  }
}

int64_t expected_int(const Row& r, DType d) {
  switch (d) {
    case DType::i32:
      return r.i32;
    case DType::i64:
      return r.i64;
    case DType::u8:
      return r.u8;
    case DType::boolean:
      return r.b;
    default:
      ADD_FAILURE() << "not an integer dtype";
      return 0;
  }
}

bool same_float(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);  // tells -0 from +0
}

// Whether the row's value is held exactly by dtype d (so it can be a conversion source).
bool exact_in(const Row& r, DType d) {
  if (is_floating(d)) return same_float(expected_float(r, d), r.value);
  const double v = r.value;
  if (!std::isfinite(v) || v != std::trunc(v)) return false;
  if (v == 0 && std::signbit(v)) return false;  // -0 is not an integer value
  switch (d) {
    case DType::i32:
      return v >= -0x1p31 && v < 0x1p31;
    case DType::i64:
      return v >= -0x1p63 && v < 0x1p63;
    case DType::u8:
      return v >= 0 && v <= 255;
    case DType::boolean:
      return v == 0 || v == 1;
    default:
      return false;
  }
}

// The elements of t as int64 (integer dtypes) read straight from memory.
std::vector<int64_t> int_values(const Tensor& t) {
  std::vector<int64_t> out;
  dispatch(t.dtype(), [&]<class T>() {
    if constexpr (std::is_integral_v<T>) {
      const T* p = t.contiguous().data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) out.push_back(static_cast<int64_t>(p[i]));
    }
  });
  return out;
}

void check_against_table(const Tensor& out, const std::vector<const Row*>& rows, DType src,
                         DType dst, const char* how) {
  ASSERT_EQ(out.dtype(), dst);
  ASSERT_EQ(out.numel(), static_cast<int64_t>(rows.size()));
  if (is_floating(dst)) {
    const std::vector<double> got = out.to_doubles();
    for (size_t i = 0; i < rows.size(); ++i)
      EXPECT_TRUE(same_float(got[i], expected_float(*rows[i], dst)))
          << how << " " << dtype_name(src) << " -> " << dtype_name(dst) << " of " << rows[i]->value
          << ": got " << got[i] << ", want " << expected_float(*rows[i], dst);
  } else {
    const std::vector<int64_t> got = int_values(out);
    for (size_t i = 0; i < rows.size(); ++i)
      EXPECT_EQ(got[i], expected_int(*rows[i], dst))
          << how << " " << dtype_name(src) << " -> " << dtype_name(dst) << " of " << rows[i]->value;
  }
}

TEST(TensorTo, TableRowsThatClaimExactnessAgreeWithTheirOwnColumns) {
  // Guards the table: a value exact in an integer dtype must list itself there.
  for (const Row& r : kRows)
    for (DType d : {DType::i32, DType::i64, DType::u8, DType::boolean})
      if (exact_in(r, d)) {
        EXPECT_EQ(static_cast<double>(expected_int(r, d)), r.value) << r.value;
      }
}

TEST(TensorTo, EveryDtypePairMatchesTheHandComputedTable) {
  int pairs = 0;
  for (DType src : kAllDTypes) {
    std::vector<const Row*> rows;
    std::vector<double> values;
    for (const Row& r : kRows)
      if (exact_in(r, src)) {
        rows.push_back(&r);
        values.push_back(r.value);
      }
    ASSERT_GE(rows.size(), 2u) << dtype_name(src);
    const Tensor s = Tensor::from_doubles(values, {static_cast<int64_t>(values.size())}, src);
    for (DType dst : kAllDTypes) {
      check_against_table(s.to(dst), rows, src, dst, "to()");
      // copy_from converts the same way, also into a strided destination.
      Tensor wide = Tensor::zeros({static_cast<int64_t>(values.size()), 2}, dst);
      Tensor col = wide.select(1, 1);
      col.copy_from(s);
      check_against_table(col, rows, src, dst, "copy_from()");
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, kNumDTypes * kNumDTypes);
}

TEST(TensorTo, EveryDtypePairWorksOnNonContiguousSources) {
  // The same table through non-contiguous sources: element order must survive.
  for (DType src : kAllDTypes) {
    std::vector<const Row*> rows;
    std::vector<double> values;
    for (const Row& r : kRows)
      if (exact_in(r, src)) {
        rows.push_back(&r);
        values.push_back(r.value);
      }
    const auto n = static_cast<int64_t>(values.size());
    // Stored as [n, 2] with each value in both columns. The transpose [2, n] is not
    // contiguous and reads the values twice over; column 1 alone is a stride-2 view.
    std::vector<double> stored;
    for (double v : values) stored.insert(stored.end(), {v, v});
    const Tensor m = Tensor::from_doubles(stored, {n, 2}, src);
    const Tensor t = m.transpose(0, 1);
    const Tensor col = m.select(1, 1);
    ASSERT_FALSE(t.is_contiguous());
    ASSERT_FALSE(col.is_contiguous());
    std::vector<const Row*> twice = rows;
    twice.insert(twice.end(), rows.begin(), rows.end());
    for (DType dst : kAllDTypes) {
      check_against_table(t.to(dst), twice, src, dst, "transposed to()");
      check_against_table(col.to(dst), rows, src, dst, "strided to()");
    }
  }
}

TEST(TensorTo, SameDtypeReturnsTheSameTensor) {
  const Tensor t = Tensor::from_doubles({1, 2, 3}, {3}, DType::bf16);
  EXPECT_TRUE(t.to(DType::bf16).shares_storage_with(t));
}

TEST(TensorTo, IntegerSourcesAboveTwoTo53StillRoundOnceIntoF64) {
  // 2^53 + 1 is a tie between 2^53 and 2^53 + 2 in f64 -> 2^53 (even);
  // 2^53 + 3 is a tie between 2^53 + 2 (odd) and 2^53 + 4 -> 2^53 + 4.
  const Tensor t = Tensor::from_vector<int64_t>(
      {(int64_t{1} << 53) + 1, (int64_t{1} << 53) + 3, kI64Max, kI64Min});
  EXPECT_EQ(t.to(DType::f64).to_doubles(),
            (std::vector<double>{0x1p53, 0x1p53 + 4, 0x1p63, -0x1p63}));
}

TEST(TensorTo, I64ToF32AndBf16RoundsOnceNotViaF64) {
  // The library converts integers through f64, which is inexact above 2^53: a second
  // rounding then lands on ties. 2^60 + 2^36 + 1 is just above the f32 tie 2^60 + 2^36
  // (f32 ulp at 2^60 is 2^37), so f32 must give 2^60 + 2^37; via f64 (ulp 2^8) it first
  // becomes exactly the tie and then rounds to even, 2^60. Same for bf16 (ulp 2^53).
  // BUG (library): convert_via_f64 in src/tensor/copy.cpp widens integers to f64 first.
  const int64_t f32_case = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;
  const int64_t bf16_case = (int64_t{1} << 60) + (int64_t{1} << 52) + 1;
  const Tensor t = Tensor::from_vector<int64_t>({f32_case, bf16_case});
  const std::vector<double> f32 = t.to(DType::f32).to_doubles();
  EXPECT_EQ(f32[0], 0x1p60 + 0x1p37);
  const std::vector<double> bf = t.to(DType::bf16).to_doubles();
  EXPECT_EQ(bf[1], 0x1p60 + 0x1p53);
}

// ---------------------------------------------------------------- single rounding from f64

TEST(TensorTo, F64NarrowingIsASingleRoundingNotViaF32) {
  // Each value is a tie of the target plus or minus 2^-40: rounding to f32 first (ulp 2^-23
  // near 1) would land exactly on the tie, and ties-to-even would then go the wrong way.
  struct Case {
    double x;
    DType dst;
    double want;
  };
  const std::vector<Case> cases = {
      // bf16 ulp near 1 is 2^-7. Tie 1 + 2^-8: even neighbour is 1.
      {1.0 + 0x1p-8 + 0x1p-40, DType::bf16, 1.0 + 0x1p-7},
      // Tie 1 + 3 x 2^-8 between 1 + 2^-7 (odd) and 1 + 2^-6 (even); just below it.
      {1.0 + 0x3p-8 - 0x1p-40, DType::bf16, 1.0 + 0x1p-7},
      {-(1.0 + 0x1p-8 + 0x1p-40), DType::bf16, -(1.0 + 0x1p-7)},
      // f16 ulp near 1 is 2^-10.
      {1.0 + 0x1p-11 + 0x1p-40, DType::f16, 1.0 + 0x1p-10},
      {1.0 + 0x3p-11 - 0x1p-40, DType::f16, 1.0 + 0x1p-10},
      // e4m3 ulp near 1 is 2^-3; e5m2's is 2^-2.
      {1.0 + 0x1p-4 + 0x1p-40, DType::f8_e4m3fn, 1.125},
      {1.0 + 0x1p-3 + 0x1p-40, DType::f8_e5m2, 1.25},
      // In the subnormal range too: e4m3's tie between 0 and 2^-9 is 2^-10.
      {0x1p-10 + 0x1p-40, DType::f8_e4m3fn, 0x1p-9},
  };
  for (const Case& c : cases) {
    const Tensor t = Tensor::from_vector<double>({c.x});
    EXPECT_EQ(t.to(c.dst).item(), c.want) << dtype_name(c.dst) << " of " << c.x;
    // The f32 detour does give the wrong answer: this proves the case is a real trap.
    EXPECT_NE(t.to(DType::f32).to(c.dst).item(), c.want) << dtype_name(c.dst) << " of " << c.x;
    // Other f64 entry points must agree.
    EXPECT_EQ(Tensor::from_doubles({c.x}, {1}, c.dst).item(), c.want);
    EXPECT_EQ(Tensor::full({1}, c.x, c.dst).item(), c.want);
  }
}

TEST(TensorTo, F64ToF32RoundsToNearestEven) {
  // 1 + 2^-24 is the f32 tie between 1 and 1 + 2^-23 -> 1; a hair above it -> 1 + 2^-23.
  const Tensor t = Tensor::from_vector<double>(
      {1.0 + 0x1p-24, 1.0 + 0x1p-24 + 0x1p-52, 1.0 + 0x3p-24, 0x1.fffffffp127});
  EXPECT_EQ(t.to(DType::f32).to_doubles(),
            (std::vector<double>{1.0, 1.0 + 0x1p-23, 1.0 + 0x1p-22, kInf}));
}

// ---------------------------------------------------------------- narrow -> narrow

// A tensor holding every bit pattern of a 16-bit (or 8-bit) float dtype.
template <class T>
Tensor all_patterns() {
  constexpr uint32_t n = 1u << (8 * sizeof(T));
  Tensor t = Tensor::empty({n}, dtype_of<T>());
  T* p = t.data<T>();
  for (uint32_t b = 0; b < n; ++b) p[b] = T::from_bits(b);
  return t;
}

template <class Dst>
uint32_t bits_at(const Tensor& t, int64_t i) {
  return t.data<Dst>()[i].bits;
}

template <class Src, class Dst>
void expect_narrow_to_narrow_is_widen_then_round() {
  const Tensor src = all_patterns<Src>();
  const Tensor direct = src.to(dtype_of<Dst>());
  const Tensor via_f32 = src.to(DType::f32).to(dtype_of<Dst>());
  const Tensor via_f64 = src.to(DType::f64).to(dtype_of<Dst>());
  int64_t mismatches = 0;
  for (int64_t i = 0; i < src.numel(); ++i) {
    // Reference: exact widening to f32, then the scalar encoder (one rounding).
    const uint32_t want =
        encode_f32(Dst::format(), decode_f32(Src::format(), static_cast<uint32_t>(i)));
    const uint32_t got = bits_at<Dst>(direct, i);
    if (got != want || bits_at<Dst>(via_f32, i) != want || bits_at<Dst>(via_f64, i) != want) {
      if (++mismatches <= 5)
        ADD_FAILURE() << "source bits 0x" << std::hex << i << ": direct 0x" << got << ", via f32 0x"
                      << bits_at<Dst>(via_f32, i) << ", via f64 0x" << bits_at<Dst>(via_f64, i)
                      << ", reference 0x" << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(TensorToNarrow, Bf16ToF16EqualsWidenThenRoundForEveryPattern) {
  expect_narrow_to_narrow_is_widen_then_round<bf16, f16>();
}

TEST(TensorToNarrow, F16ToE4m3EqualsWidenThenRoundForEveryPattern) {
  expect_narrow_to_narrow_is_widen_then_round<f16, f8_e4m3fn>();
}

TEST(TensorToNarrow, Fp8PairsAndF16ToBf16EqualWidenThenRoundForEveryPattern) {
  expect_narrow_to_narrow_is_widen_then_round<f8_e5m2, f8_e4m3fn>();
  expect_narrow_to_narrow_is_widen_then_round<f8_e4m3fn, f8_e5m2>();
  expect_narrow_to_narrow_is_widen_then_round<f16, bf16>();
  // FP8 to the 16-bit formats: how the FP8 GEMM widens its operands (exact).
  expect_narrow_to_narrow_is_widen_then_round<f8_e4m3fn, bf16>();
  expect_narrow_to_narrow_is_widen_then_round<f8_e5m2, f16>();
}

TEST(TensorToNarrow, HandPickedBf16ToF16Values) {
  // bf16 0x3F81 = 1 + 2^-7 (exact in f16: 0x3C08); 0x47C3 = 99840 (> 65504: inf);
  // 0x3080 = 2^-30 (below half of f16's 2^-24: +0); 0x3380 = 2^-24 (f16 0x0001).
  Tensor t = Tensor::empty({4}, DType::bf16);
  bf16* p = t.data<bf16>();
  p[0] = bf16::from_bits(0x3F81);
  p[1] = bf16::from_bits(0x47C3);
  p[2] = bf16::from_bits(0x3080);
  p[3] = bf16::from_bits(0x3380);
  const Tensor h = t.to(DType::f16);
  const f16* q = h.data<f16>();
  EXPECT_EQ(q[0].bits, 0x3C08);
  EXPECT_EQ(q[1].bits, 0x7C00);
  EXPECT_EQ(q[2].bits, 0x0000);
  EXPECT_EQ(q[3].bits, 0x0001);
}

// ---------------------------------------------------------------- stochastic rounding

std::vector<float> test_floats(std::size_t n) {
  // Values spread over many binades, with plenty of discarded bits to round.
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const uint32_t r = philox_u32(12345, 0, i);
    v[i] = std::ldexp(1.0f + static_cast<float>(r & 0xFFFFFF) * 0x1p-24f,
                      static_cast<int>((r >> 24) % 40) - 20) *
           ((r >> 31) ? -1.0f : 1.0f);
  }
  return v;
}

TEST(TensorToStochastic, SameSeedAndStreamGiveIdenticalBits) {
  const Tensor x = Tensor::from_vector(test_floats(200003));  // several parallel chunks, odd tail
  const ConvertOptions opts{.rounding = Rounding::stochastic, .seed = 99, .stream = 5};
  for (DType d : {DType::bf16, DType::f16, DType::f8_e4m3fn, DType::f8_e5m2}) {
    const Tensor a = x.to(d, opts);
    const Tensor b = x.to(d, opts);
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << dtype_name(d);
  }
}

TEST(TensorToStochastic, DifferentSeedOrStreamChangesSomeBits) {
  const Tensor x = Tensor::from_vector(test_floats(4096));
  const ConvertOptions base{.rounding = Rounding::stochastic, .seed = 99, .stream = 5};
  ConvertOptions other_seed = base, other_stream = base;
  other_seed.seed = 100;
  other_stream.stream = 6;
  const Tensor a = x.to(DType::bf16, base);
  // With ~4096 values each rounding up with a fresh probability, identical output under a
  // different random stream is practically impossible (and a sign the options were ignored).
  EXPECT_NE(std::memcmp(a.raw_data(), x.to(DType::bf16, other_seed).raw_data(), a.nbytes()), 0);
  EXPECT_NE(std::memcmp(a.raw_data(), x.to(DType::bf16, other_stream).raw_data(), a.nbytes()), 0);
}

TEST(TensorToStochastic, MatchesTheScalarEncoderWithPhiloxWordIndexedByElement) {
  // rounding.h: element i draws Philox at counter (index_base + i, stream) under `seed`.
  const std::vector<float> v = test_floats(70001);
  const std::vector<double> v64(v.begin(), v.end());
  const ConvertOptions opts{
      .rounding = Rounding::stochastic, .seed = 0xABCDEF, .stream = 3, .index_base = 17};
  const Tensor from32 = Tensor::from_vector(v).to(DType::bf16, opts);
  const Tensor from64 = Tensor::from_vector(v64).to(DType::bf16, opts);
  int64_t bad32 = 0, bad64 = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const uint32_t random = philox_u32(opts.seed, opts.stream, opts.index_base + i);
    const uint32_t want = encode_f32(kFormatBF16, v[i], Rounding::stochastic, false, random);
    bad32 += from32.data<bf16>()[i].bits != want;
    bad64 += from64.data<bf16>()[i].bits != want;  // f32 values are exact in f64
  }
  EXPECT_EQ(bad32, 0);
  EXPECT_EQ(bad64, 0);
}

TEST(TensorToStochastic, NarrowToNarrowMatchesTheScalarEncoderOverManyChunks) {
  // bf16 -> e4m3 (and f16 -> e5m2) go through f32 in blocks, spread over the threads; element
  // i must still use the Philox word of global index index_base + i in every block, at one
  // thread and at two.
  const int saved = num_threads();
  for (const int threads : {1, 2}) {
    set_num_threads(threads);
    const std::size_t n = 100000;
    const std::vector<float> v = test_floats(n);
    const ConvertOptions opts{
        .rounding = Rounding::stochastic, .seed = 31337, .stream = 9, .index_base = 5};
    const Tensor src_bf16 = Tensor::from_vector(v).to(DType::bf16);
    const Tensor src_f16 = Tensor::from_vector(v).to(DType::f16);
    const Tensor e4m3 = src_bf16.to(DType::f8_e4m3fn, opts);
    const Tensor e5m2 = src_f16.to(DType::f8_e5m2, opts);
    int64_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const uint32_t random = philox_u32(opts.seed, opts.stream, opts.index_base + i);
      const float a = decode_f32(kFormatBF16, src_bf16.data<bf16>()[i].bits);
      const float b = decode_f32(kFormatF16, src_f16.data<f16>()[i].bits);
      bad += e4m3.data<f8_e4m3fn>()[i].bits !=
             encode_f32(kFormatE4M3FN, a, Rounding::stochastic, false, random);
      bad += e5m2.data<f8_e5m2>()[i].bits !=
             encode_f32(kFormatE5M2, b, Rounding::stochastic, false, random);
    }
    EXPECT_EQ(bad, 0) << threads << " threads";
  }
  set_num_threads(saved);
}

TEST(TensorToStochastic, IntegerSourcesUseTheGlobalElementIndexToo) {
  // i32 -> bf16 runs through f64 in chunks of 4096; the random word must follow the element.
  const int64_t n = 20000;
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 1000003 + 7 * static_cast<int32_t>(i);
  const ConvertOptions opts{
      .rounding = Rounding::stochastic, .seed = 4242, .stream = 2, .index_base = 3};
  const Tensor out = Tensor::from_vector(v).to(DType::bf16, opts);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t random =
        philox_u32(opts.seed, opts.stream, opts.index_base + static_cast<uint64_t>(i));
    bad += out.data<bf16>()[i].bits !=
           encode_f64(kFormatBF16, v[static_cast<size_t>(i)], Rounding::stochastic, false, random);
  }
  EXPECT_EQ(bad, 0);
}

TEST(TensorToStochastic, RoundsUpWithProbabilityEqualToTheDiscardedFraction) {
  // 1 + 2^-9 sits a quarter of the way from bf16 1 to 1 + 2^-7: P(up) = 1/4.
  // n = 65536 draws: mean 16384 ups, sd sqrt(n p (1-p)) = 110.9. Six sd (+-665) makes a
  // false failure ~1e-9 for a correct rounder, while a biased one (e.g. p = 0 or 1/2) is
  // thousands of counts off.
  const int64_t n = 1 << 16;
  const Tensor x = Tensor::full({n}, 1.0 + 0x1p-9, DType::f32);
  const ConvertOptions opts{.rounding = Rounding::stochastic, .seed = 2024, .stream = 0};
  const std::vector<double> y = x.to(DType::bf16, opts).to_doubles();
  int64_t ups = 0, others = 0;
  for (double v : y) {
    if (v == 1.0 + 0x1p-7)
      ++ups;
    else if (v != 1.0)
      ++others;
  }
  EXPECT_EQ(others, 0);  // only the two neighbours are possible
  EXPECT_NEAR(static_cast<double>(ups), 16384.0, 665.0);
}

TEST(TensorToStochastic, IndependentOfThreadCount) {
  // Random words are keyed by element index, so splitting over threads cannot change them.
  const Tensor x = Tensor::from_vector(test_floats(1 << 18));
  const ConvertOptions opts{.rounding = Rounding::stochastic, .seed = 7, .stream = 1};
  const int saved = num_threads();
  set_num_threads(1);
  const Tensor one = x.to(DType::bf16, opts);
  const Tensor one8 = x.to(DType::f8_e5m2, opts);
  set_num_threads(2);
  const Tensor two = x.to(DType::bf16, opts);
  const Tensor two8 = x.to(DType::f8_e5m2, opts);
  set_num_threads(saved);
  EXPECT_EQ(std::memcmp(one.raw_data(), two.raw_data(), one.nbytes()), 0);
  EXPECT_EQ(std::memcmp(one8.raw_data(), two8.raw_data(), one8.nbytes()), 0);
}

// ---------------------------------------------------------------- round trips

TEST(TensorRoundTrip, F32ToBf16ToF32MatchesTheScalarEncoder) {
  std::vector<float> v = test_floats(1 << 16);
  // Specials: zeros, infinities, NaNs with payloads, subnormals, max, ties.
  for (uint32_t bits :
       {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFC12345u,
        0x00000001u, 0x807FFFFFu, 0x7F7FFFFFu, 0x3F808000u, 0x3F818000u, 0x3F808001u, 0x7F7F8000u})
    v.push_back(std::bit_cast<float>(bits));
  const Tensor back = Tensor::from_vector(v).to(DType::bf16).to(DType::f32);
  const float* p = back.data<float>();
  int64_t bad = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const uint32_t want =
        std::bit_cast<uint32_t>(decode_f32(kFormatBF16, encode_f32(kFormatBF16, v[i])));
    if (std::bit_cast<uint32_t>(p[i]) != want && ++bad <= 5)
      ADD_FAILURE() << std::hex << "input 0x" << std::bit_cast<uint32_t>(v[i]) << ": got 0x"
                    << std::bit_cast<uint32_t>(p[i]) << ", want 0x" << want;
  }
  EXPECT_EQ(bad, 0);
}

TEST(TensorRoundTrip, HandPickedBf16RoundTrips) {
  // 0x3F808000 = 1 + 2^-8: tie -> 1. 0x3F818000 = 1 + 3 x 2^-8: tie -> 1 + 2^-6.
  // 0x7F7F8000: max f32 region, rounds to 2^128 -> inf. 0x00000001 (2^-149) -> +0 via RNE.
  const std::vector<float> v = {std::bit_cast<float>(0x3F808000u),
                                std::bit_cast<float>(0x3F818000u),
                                std::bit_cast<float>(0x7F7F8000u), 0x1p-149f};
  const Tensor back = Tensor::from_vector(v).to(DType::bf16).to(DType::f32);
  EXPECT_EQ(back.to_doubles(), (std::vector<double>{1.0, 1.0 + 0x1p-6, kInf, 0.0}));
}

TEST(TensorRoundTrip, WideningNarrowValuesIsExact) {
  // Every bf16 pattern survives bf16 -> f32 -> bf16 and bf16 -> f64 -> bf16 bit for bit,
  // NaNs included (bf16 NaNs are already quiet-or-payload preserving through f32).
  const Tensor t = all_patterns<bf16>();
  const Tensor a = t.to(DType::f64).to(DType::bf16);
  int64_t bad = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint32_t b = static_cast<uint32_t>(i);
    const bool nan = kFormatBF16.is_nan(b);
    const uint32_t got = a.data<bf16>()[i].bits;
    // NaNs come back as NaNs (the quiet bit may be set on the way); others bit-exact.
    bad += nan ? !kFormatBF16.is_nan(got) : got != b;
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace mixprec
