// add/sub/mul/div/scale: broadcasting against an independent index-by-index reference, dtype
// promotion, f64 gradient checks (broadcast and mixed-layout cases), low precision vs the f32
// kernel on the same rounded inputs, thread-count and ISA independence, bad input.
#include "mixprec/ops/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "mixprec/cpu/elementwise.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
struct NamedOp {
  const char* name;
  BinaryFn fn;
  double (*ref)(double, double);
};
const NamedOp kOps[] = {
    {"add", add, [](double a, double b) { return a + b; }},
    {"sub", sub, [](double a, double b) { return a - b; }},
    {"mul", mul, [](double a, double b) { return a * b; }},
    {"div", div, [](double a, double b) { return a / b; }},
};

// Row-major index into `in` (aligned at the trailing dims) of output element i.
int64_t source_index(const Shape& out, const Shape& in, int64_t i) {
  int64_t src = 0, stride = 1;
  for (int d = static_cast<int>(out.size()) - 1, e = static_cast<int>(in.size()) - 1; d >= 0;
       --d, --e) {
    const int64_t coord = i % out[static_cast<size_t>(d)];
    i /= out[static_cast<size_t>(d)];
    if (e >= 0) {
      const int64_t n = in[static_cast<size_t>(e)];
      if (n != 1) src += coord * stride;
      stride *= n;
    }
  }
  return src;
}

// op applied element by element in f64 with explicit broadcast indexing.
std::vector<double> reference(const NamedOp& op, const Tensor& a, const Tensor& b,
                              const Shape& out) {
  const std::vector<double> av = a.to_doubles(), bv = b.to_doubles();
  std::vector<double> r(static_cast<size_t>(shape_numel(out)));
  for (int64_t i = 0; i < shape_numel(out); ++i)
    r[static_cast<size_t>(i)] = op.ref(av[static_cast<size_t>(source_index(out, a.shape(), i))],
                                       bv[static_cast<size_t>(source_index(out, b.shape(), i))]);
  return r;
}

// Divisors kept away from zero: sign(b)·(0.5 + |b|).
Tensor away_from_zero(const Tensor& b) {
  std::vector<double> v = b.to_doubles();
  for (double& x : v) x = std::copysign(0.5 + std::fabs(x), x);
  return Tensor::from_doubles(v, b.shape(), b.dtype());
}

// The broadcast patterns the kernels treat differently: same shape (one flat pass), a row
// broadcast over rows (bias), a column broadcast, a scalar, both sides broadcast, and
// patterns that leave a short inner dim (general path).
const std::pair<Shape, Shape> kShapes[] = {
    {{3, 4}, {3, 4}},       {{5, 7}, {7}},          {{6, 5}, {6, 1}},
    {{2, 3, 4}, {}},        {{4, 1, 5}, {3, 1}},    {{1}, {2, 3}},
    {{2, 3, 4}, {2, 1, 4}}, {{3, 1, 2}, {1, 4, 1}}, {{2, 1, 3, 1}, {5, 1, 1}},
    {{1, 1}, {1, 1, 1}},    {{0, 3}, {3}},          {{4, 0}, {1, 1}},
    {{2, 3}, {1, 3}},       {{2, 2, 2, 2}, {2, 2}}};

TEST(Elementwise, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes({4, 1, 5}, {3, 1}), (Shape{4, 3, 5}));
  EXPECT_EQ(broadcast_shapes({}, {2, 3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({2, 3}, {}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({0}, {1}), (Shape{0}));
  EXPECT_EQ(broadcast_shapes({1, 0}, {3, 1}), (Shape{3, 0}));
  EXPECT_EQ(broadcast_shapes({5, 1, 7}, {1, 6, 1}), (Shape{5, 6, 7}));
  EXPECT_THROW(broadcast_shapes({3}, {4}), Error);
  EXPECT_THROW(broadcast_shapes({2, 3}, {3, 2}), Error);
  EXPECT_THROW(broadcast_shapes({0}, {2}), Error);
  try {
    broadcast_shapes({2, 5}, {4});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[2, 5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[4]"), std::string::npos) << msg;
  }
}

TEST(Elementwise, ForwardMatchesIndexByIndexReference) {
  uint64_t seed = 1;
  for (const auto& [sa, sb] : kShapes) {
    for (const NamedOp& op : kOps) {
      for (bool swap : {false, true}) {
        const Shape& s0 = swap ? sb : sa;
        const Shape& s1 = swap ? sa : sb;
        const std::string what =
            std::string(op.name) + " " + shape_to_string(s0) + " with " + shape_to_string(s1);
        const Tensor a = randn(s0, DType::f64, seed++);
        Tensor b = randn(s1, DType::f64, seed++);
        if (op.fn == div) b = away_from_zero(b);
        const Tensor out = op.fn(a, b);
        const Shape shape = broadcast_shapes(s0, s1);
        ASSERT_EQ(out.shape(), shape) << what;
        EXPECT_EQ(out.dtype(), DType::f64);
        // f64 math is the same IEEE operation: exact.
        EXPECT_EQ(out.to_doubles(), reference(op, a, b, shape)) << what;
        // f32 kernel: each element correctly rounded from the f64 result of the same inputs.
        const Tensor a32 = a.to(DType::f32), b32 = b.to(DType::f32);
        const Tensor out32 = op.fn(a32, b32);
        EXPECT_EQ(out32.dtype(), DType::f32);
        expect_close(out32, Tensor::from_doubles(reference(op, a32, b32, shape), shape, DType::f64),
                     0, 0x1p-24, what + " f32");
      }
    }
  }
}

TEST(Elementwise, NonContiguousOperands) {
  // Transposed and sliced views read through their strides (the kernel copies them first).
  const Tensor base = randn({6, 8}, DType::f32, 7);
  const Tensor t = base.transpose(0, 1);                         // [8, 6]
  const Tensor s = base.slice(1, 1, 8, 2);                       // [6, 4]
  const Tensor row = randn({8, 2}, DType::f32, 8).select(1, 1);  // [8], stride 2
  for (const NamedOp& op : kOps) {
    if (op.fn == div) continue;
    expect_close(
        op.fn(t, row.unsqueeze(1)),
        Tensor::from_doubles(reference(op, t, row.unsqueeze(1), {8, 6}), {8, 6}, DType::f64), 0,
        0x1p-24, std::string(op.name) + " transposed");
    expect_close(op.fn(s, s), Tensor::from_doubles(reference(op, s, s, {6, 4}), {6, 4}, DType::f64),
                 0, 0x1p-24, std::string(op.name) + " sliced");
  }
}

TEST(Elementwise, PromotionAndMixedDtypes) {
  const Tensor a16 = randn({4, 6}, DType::bf16, 11), b32 = randn({6}, DType::f32, 12);
  const Tensor h = randn({4, 6}, DType::f16, 13), d = randn({4, 6}, DType::f64, 14);
  // bf16 + f32 -> f32: exactly the f32 kernel on the widened bf16 values.
  const Tensor ab = add(a16, b32);
  EXPECT_EQ(ab.dtype(), DType::f32);
  EXPECT_TRUE(same_bits(ab, add(a16.to(DType::f32), b32)));
  // bf16 * f16 -> f32 (neither holds the other's values).
  const Tensor ah = mul(a16, h);
  EXPECT_EQ(ah.dtype(), DType::f32);
  EXPECT_TRUE(same_bits(ah, mul(a16.to(DType::f32), h.to(DType::f32))));
  // f64 wins, computed in f64.
  const Tensor ad = sub(a16, d);
  EXPECT_EQ(ad.dtype(), DType::f64);
  EXPECT_EQ(ad.to_doubles(), sub(a16.to(DType::f64), d).to_doubles());
  // Integers join as the other operand's dtype.
  const Tensor ints = Tensor::from_vector<int32_t>({1, -2, 3, 4, 5, 6});
  const Tensor ai = add(a16, ints);
  EXPECT_EQ(ai.dtype(), DType::bf16);
  EXPECT_TRUE(same_bits(ai, add(a16, ints.to(DType::bf16))));
  EXPECT_EQ(div(ints, Tensor::full({1}, 2.0, DType::f32)).to_doubles(),
            (std::vector<double>{0.5, -1, 1.5, 2, 2.5, 3}));
}

TEST(Elementwise, LowPrecisionIsTheF32KernelRoundedOnce) {
  for (DType dt : {DType::bf16, DType::f16}) {
    for (const auto& [sa, sb] : kShapes) {
      for (const NamedOp& op : kOps) {
        const std::string what = std::string(op.name) + " " + dtype_name(dt) + " " +
                                 shape_to_string(sa) + " with " + shape_to_string(sb);
        const Tensor a = randn(sa, dt, 21, 3.0);
        Tensor b = randn(sb, dt, 22);
        if (op.fn == div) b = away_from_zero(b);
        const Tensor out = op.fn(a, b);
        EXPECT_EQ(out.dtype(), dt);
        // f32 arithmetic on the same values, one rounding: bit for bit.
        EXPECT_TRUE(same_bits(out, op.fn(a.to(DType::f32), b.to(DType::f32)).to(dt))) << what;
        // Within one rounding of the exact result.
        const double ulp = dt == DType::bf16 ? 0x1p-8 : 0x1p-10;
        const Shape shape = broadcast_shapes(sa, sb);
        expect_close(out, Tensor::from_doubles(reference(op, a, b, shape), shape, DType::f64),
                     dt == DType::f16 ? 0x1p-24 : 0, ulp, what);
      }
    }
  }
}

TEST(Elementwise, SpecialValuesFollowIeee) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const std::vector<double> av = {1, -1, 0, inf, -inf, nan, 3e38, -0.0};
  const std::vector<double> bv = {0, 0, 0, inf, 2, 1, 3e38, 0};
  for (DType dt : {DType::f64, DType::f32, DType::bf16}) {
    const Tensor a = Tensor::from_doubles(av, {8}, dt), b = Tensor::from_doubles(bv, {8}, dt);
    for (const NamedOp& op : kOps) {
      const std::vector<double> got = op.fn(a, b).to_doubles();
      const std::vector<double> ar = a.to_doubles(), br = b.to_doubles();
      for (size_t i = 0; i < av.size(); ++i) {
        // The f32 result rounded into dt (f32 overflow -> inf; bf16 shares f32's range).
        const double want = Tensor::from_doubles({op.ref(ar[i], br[i])}, {1}, dt).item();
        if (std::isnan(want))
          EXPECT_TRUE(std::isnan(got[i])) << op.name << " " << dtype_name(dt) << " " << i;
        else
          EXPECT_EQ(got[i], want) << op.name << " " << dtype_name(dt) << " " << i;
      }
    }
  }
}

TEST(Elementwise, ScaleTakesTheScalarInF32) {
  const Tensor x = randn({3, 7, 5}, DType::bf16, 31);
  const Tensor y = scale(x, 0.37);
  EXPECT_EQ(y.dtype(), DType::bf16);
  const std::vector<double> xv = x.to_doubles(), yv = y.to_doubles();
  int differs_from_bf16_scalar = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const float prod = static_cast<float>(xv[i]) * 0.37f;
    EXPECT_EQ(yv[i], static_cast<float>(bf16(prod))) << i;
    // PyTorch rounds the Python scalar to bf16 (0.369140625) first.
    const float torch_like = static_cast<float>(xv[i]) * 0.369140625f;
    differs_from_bf16_scalar += static_cast<float>(bf16(torch_like)) != yv[i];
  }
  EXPECT_GT(differs_from_bf16_scalar, 0);
  // f64 keeps the scalar whole; f32 rounds it to f32 first.
  const Tensor x64 = Tensor::from_doubles({3.0}, {1}, DType::f64);
  EXPECT_EQ(scale(x64, 0.1).item(), 3.0 * 0.1);
  EXPECT_EQ(scale(x64.to(DType::f32), 0.1).item(), static_cast<double>(3.0f * 0.1f));
  EXPECT_EQ(scale(Tensor::zeros({0, 4}), 2.0).shape(), (Shape{0, 4}));
}

TEST(Elementwise, Gradcheck) {
  uint64_t seed = 100;
  for (const auto& [sa, sb] : kShapes) {
    if (shape_numel(sa) == 0 || shape_numel(sb) == 0) continue;
    for (const NamedOp& op : kOps) {
      Tensor a = grad_input(sa, seed++), b = grad_input(sb, seed++);
      if (op.fn == div) b = away_from_zero(b).set_requires_grad(true, DType::f64);
      expect_gradcheck(
          [&](const std::vector<Tensor>& in) { return op.fn(in[0], in[1]); }, {a, b},
          std::string(op.name) + " " + shape_to_string(sa) + " with " + shape_to_string(sb));
    }
  }
  // Only one side requiring grad; the same tensor on both sides; a transposed view.
  for (const NamedOp& op : kOps) {
    const Tensor c = away_from_zero(randn({3, 4}, DType::f64, 5));
    expect_gradcheck([&](const std::vector<Tensor>& in) { return op.fn(in[0], c); },
                     {grad_input({4}, 6)}, std::string(op.name) + " constant b");
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) { return op.fn(c, in[0]); },
        {away_from_zero(randn({3, 1}, DType::f64, 7)).set_requires_grad(true, DType::f64)},
        std::string(op.name) + " constant a");
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) { return op.fn(in[0], in[0]); },
        {away_from_zero(randn({2, 3}, DType::f64, 8)).set_requires_grad(true, DType::f64)},
        std::string(op.name) + " x op x");
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) { return op.fn(in[0].transpose(0, 1), in[1]); },
        {grad_input({4, 3}, 9),
         away_from_zero(randn({3, 1}, DType::f64, 10)).set_requires_grad(true, DType::f64)},
        std::string(op.name) + " transposed a");
  }
  expect_gradcheck([](const std::vector<Tensor>& in) { return scale(in[0], -0.37); },
                   {grad_input({3, 5}, 11)}, "scale");
  // Chained: gradients flow through a broadcast op into another.
  expect_gradcheck(
      [](const std::vector<Tensor>& in) { return mul(add(in[0], in[1]), div(in[0], in[2])); },
      {grad_input({4, 5}, 12), grad_input({5}, 13),
       away_from_zero(randn({4, 1}, DType::f64, 14)).set_requires_grad(true, DType::f64)},
      "chain");
}

Tensor abs_of(const Tensor& t) {
  std::vector<double> v = t.to_doubles();
  for (double& x : v) x = std::fabs(x);
  return Tensor::from_doubles(v, t.shape(), DType::f64);
}

// |got - want| <= ulp·|want| + n·2^-24·mag elementwise: one final rounding plus the f32 error
// of summing n terms whose magnitudes add up to mag (plus f16's subnormal spacing).
void expect_within(const Tensor& got, const Tensor& want, const Tensor& mag, double ulp, int n,
                   const std::string& what) {
  const double floor = got.dtype() == DType::f16 ? 0x1p-24 : 1e-30;  // f16 subnormal spacing
  const std::vector<double> g = got.to_doubles(), w = want.to_doubles(), m = mag.to_doubles();
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_LE(std::fabs(g[i] - w[i]), ulp * std::fabs(w[i]) + n * 0x1p-24 * std::fabs(m[i]) + floor)
        << what << " element " << i << ": " << g[i] << " vs " << w[i];
}

TEST(Elementwise, LowPrecisionGradients) {
  // x [64, 40] and b of several shapes: b's gradient sums 64 and/or 40 terms with f32
  // accumulation and one final rounding into b's dtype.
  for (DType dt : {DType::bf16, DType::f16}) {
    for (const NamedOp& op : kOps) {
      for (const Shape& sb : {Shape{40}, Shape{64, 1}, Shape{64, 40}, Shape{}}) {
        const std::string what =
            std::string(op.name) + " " + dtype_name(dt) + " b " + shape_to_string(sb);
        Tensor x = randn({64, 40}, dt, 41).set_requires_grad(true, dt);
        Tensor b = away_from_zero(randn(sb, dt, 42));
        b.set_requires_grad(true, dt);
        const Tensor g = randn({64, 40}, dt, 43);
        op.fn(x, b).backward(g);
        EXPECT_EQ(x.grad().dtype(), dt);
        EXPECT_EQ(b.grad().dtype(), dt);
        // Reference: f64 on the same rounded values; term magnitudes from the same backward
        // on absolute values.
        Tensor x64 = rounded(x, dt).set_requires_grad(true, DType::f64);
        Tensor b64 = rounded(b, dt).set_requires_grad(true, DType::f64);
        op.fn(x64, b64).backward(g.to(DType::f64));
        Tensor xa = abs_of(x64).set_requires_grad(true, DType::f64);
        Tensor ba = abs_of(b64).set_requires_grad(true, DType::f64);
        op.fn(xa, ba).backward(abs_of(g));
        const double ulp = dt == DType::bf16 ? 0x1p-8 : 0x1p-10;
        expect_within(x.grad(), x64.grad(), abs_of(xa.grad()), ulp, 2, what + " dx");
        expect_within(b.grad(), b64.grad(), abs_of(ba.grad()), ulp, 64 * 40, what + " db");
      }
    }
  }
}

TEST(Elementwise, SubtractionGradientIsNegatedExactly) {
  Tensor a = randn({5, 3}, DType::f32, 51).set_requires_grad();
  Tensor b = randn({3}, DType::f32, 52).set_requires_grad();
  const Tensor g = randn({5, 3}, DType::f32, 53);
  sub(a, b).backward(g);
  EXPECT_TRUE(same_bits(a.grad(), g));
  Tensor a2 = a.detach().set_requires_grad();
  Tensor b2 = b.detach().set_requires_grad();
  add(a2, b2).backward(g);
  EXPECT_TRUE(same_bits(b.grad(), scale(b2.grad(), -1.0)));
}

TEST(Elementwise, SameBitsWithOneAndTwoThreadsAndBothIsas) {
  // Shapes large enough to split over threads, for each kernel path.
  const std::pair<Shape, Shape> cases[] = {{{256, 300}, {256, 300}},
                                           {{300, 257}, {257}},
                                           {{1000, 70}, {1000, 1}},
                                           {{64, 3, 200}, {3, 1}},
                                           {{3, 40000}, {3, 1}}};
  for (DType dt : {DType::f32, DType::bf16}) {
    for (const auto& [sa, sb] : cases) {
      const Tensor a0 = randn(sa, dt, 61), b0 = away_from_zero(randn(sb, dt, 62));
      const Tensor g = randn(broadcast_shapes(sa, sb), dt, 63);
      for (const NamedOp& op : kOps) {
        auto run = [&] {
          Tensor a = a0.detach().set_requires_grad(true, dt);
          Tensor b = b0.detach().set_requires_grad(true, dt);
          Tensor y = op.fn(a, b);
          y.backward(g);
          return std::vector<Tensor>{y, a.grad(), b.grad()};
        };
        const auto one = testing::with_threads(1, run), two = testing::with_threads(2, run);
        for (size_t i = 0; i < one.size(); ++i)
          EXPECT_TRUE(same_bits(one[i], two[i]))
              << op.name << " " << dtype_name(dt) << " " << shape_to_string(sa) << " tensor " << i;
      }
      // The SSE2 and AVX2 builds of the kernels give the same bits.
      const Tensor& a = a0;
      const Tensor& b = b0;
      const Shape shape = broadcast_shapes(sa, sb);
      for (auto op :
           {cpu::BinaryOp::add, cpu::BinaryOp::sub, cpu::BinaryOp::mul, cpu::BinaryOp::div})
        EXPECT_TRUE(same_bits(cpu::binary(op, a, b, shape, dt, Isa::scalar),
                              cpu::binary(op, a, b, shape, dt, Isa::best)));
    }
  }
}

TEST(Elementwise, BadInputIsAnError) {
  const Tensor a = Tensor::ones({3, 4});
  EXPECT_THROW(add(a, Tensor::ones({3})), Error);
  EXPECT_THROW(mul(a, Tensor::ones({4, 3})), Error);
  EXPECT_THROW(sub(a, Tensor()), Error);
  EXPECT_THROW(div(Tensor(), a), Error);
  EXPECT_THROW(add(a, Tensor::empty({3, 4}, DType::f32, Device::meta)), Error);
  // Integer or storage-only results have no arithmetic here.
  EXPECT_THROW(add(Tensor::ones({2}, DType::i32), Tensor::ones({2}, DType::i64)), Error);
  EXPECT_THROW(mul(Tensor::ones({2}, DType::f8_e4m3fn), Tensor::ones({2}, DType::f8_e4m3fn)),
               Error);
  EXPECT_THROW(scale(Tensor::ones({2}, DType::i32), 2.0), Error);
  EXPECT_THROW(scale(Tensor(), 2.0), Error);
  // The kernel layer checks its shape argument too.
  EXPECT_THROW(cpu::binary(cpu::BinaryOp::add, a, a, {4, 3}, DType::f32), Error);
  EXPECT_THROW(cpu::binary(cpu::BinaryOp::add, a, a, {3, 4}, DType::i32), Error);
}

}  // namespace
}  // namespace mixprec
