// gelu / gelu_tanh / silu / swiglu / dropout: accuracy of the f32 approximations against f64
// formulas written here (dense sweeps, tails included), f64 gradient checks, low precision vs
// the f32 kernel on the same rounded inputs, thread-count and ISA independence, the dropout
// mask against Philox itself, bad input.
#include "mixprec/ops/activation.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "mixprec/cpu/activation.h"
#include "mixprec/numerics/philox.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

// ---- f64 references (value, derivative, and the size of the derivative's terms) ----------

struct Ref {
  double y, dy, dy_scale;
};

Ref gelu_ref(double x) {
  const double cdf = 0.5 * std::erfc(-x / std::numbers::sqrt2);
  const double xpdf = x * std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
  return {x * cdf, cdf + xpdf, std::fabs(cdf) + std::fabs(xpdf)};
}

// σ(v) and σ(v)(1-σ(v)) without overflow for any v.
void sigmoid_ref(double v, double& s, double& s1s) {
  const double e = std::exp(-std::fabs(v));
  s = v >= 0 ? 1 / (1 + e) : e / (1 + e);
  s1s = e / ((1 + e) * (1 + e));
}

// 0.5·x·(1 + tanh u) written as x·σ(2u) (the same function; the tanh form cancels for x < 0).
Ref gelu_tanh_ref(double x) {
  const double k = std::sqrt(2 / std::numbers::pi), c = 0.044715;
  const double u = k * (x + c * x * x * x);
  double s, s1s;
  sigmoid_ref(2 * u, s, s1s);
  const double t = x * s1s * 2 * k * (1 + 3 * c * x * x);
  return {x * s, s + t, std::fabs(s) + std::fabs(t)};
}

Ref silu_ref(double x) {
  double s, s1s;
  sigmoid_ref(x, s, s1s);
  return {x * s, s + x * s1s, std::fabs(s) + std::fabs(x * s1s)};
}

struct Act {
  const char* name;
  Tensor (*op)(const Tensor&);
  cpu::Activation kind;
  Ref (*ref)(double);
  // Conditioning of the f32 evaluation at x: gelu_tanh's argument 2u is rounded in f32, so
  // its error grows with |u| (the tanh form in f32 has the same argument rounding).
  double (*cond)(double);
};
const Act kActs[] = {
    {"gelu", gelu, cpu::Activation::gelu, gelu_ref, [](double) { return 1.0; }},
    {"gelu_tanh", gelu_tanh, cpu::Activation::gelu_tanh, gelu_tanh_ref,
     [](double x) { return 1 + 0.4 * std::fabs(x) * (1 + 0.044715 * x * x); }},
    {"silu", silu, cpu::Activation::silu, silu_ref, [](double) { return 1.0; }},
};

// Inputs for the accuracy sweeps: every finite bf16 value with |x| <= 40, a fine grid over
// [-16, 16], and log-spaced magnitudes down to 1e-30.
Tensor sweep_inputs() {
  std::vector<double> v;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float x = std::bit_cast<float>(b << 16);
    if (std::isfinite(x) && std::fabs(x) <= 40) v.push_back(x);
  }
  for (int i = -(1 << 15); i <= (1 << 15); ++i) v.push_back(i / 2048.0 + 1.0 / 7777);
  for (double m = 1e-30; m < 100; m *= 1.05) {
    v.push_back(m);
    v.push_back(-m);
  }
  return Tensor::from_doubles(v, {static_cast<int64_t>(v.size())}, DType::f32);
}

// |got - ref| <= tol·scale·cond(x) + 2^-140 for every element (the floor covers results in
// the f32 subnormal range).
void expect_accurate(const std::vector<double>& xv, const std::vector<Ref>& refs, const Tensor& got,
                     const Act& act, bool derivative, double tol, const std::string& what) {
  const std::vector<double> gv = got.to_doubles();
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const Ref& r = refs[i];
    const double want = derivative ? r.dy : r.y;
    const double scale = (derivative ? r.dy_scale : std::fabs(r.y)) * act.cond(xv[i]);
    const double err = (std::fabs(gv[i] - want) - 0x1p-140) / scale;
    if (!(err <= worst)) {
      worst = std::isnan(err) ? INFINITY : err;
      worst_i = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": worst at x = " << xv[worst_i] << " got " << gv[worst_i];
}

std::vector<Ref> refs_of(const Act& act, const std::vector<double>& xv) {
  std::vector<Ref> r;
  r.reserve(xv.size());
  for (double x : xv) r.push_back(act.ref(x));
  return r;
}

TEST(Activation, F32ApproximationsMatchF64Formulas) {
  const Tensor x = sweep_inputs();
  const std::vector<double> xv = x.to_doubles();
  const Tensor ones = Tensor::ones(x.shape());
  std::vector<Isa> isas = {Isa::scalar, Isa::best};
  if (cpu_has_avx2_f16c()) isas.push_back(Isa::avx2);
  for (const Act& act : kActs) {
    const std::vector<Ref> refs = refs_of(act, xv);
    for (Isa isa : isas) {
      const std::string what = std::string(act.name) + " isa " + std::to_string(int(isa));
      expect_accurate(xv, refs, cpu::activation_forward(act.kind, x, isa), act, false, 1e-6, what);
      expect_accurate(xv, refs, cpu::activation_backward(act.kind, x, ones, isa), act, true, 1e-6,
                      what + " derivative");
    }
  }
}

TEST(Activation, F64PathMatchesFormulas) {
  const Tensor x = sweep_inputs().to(DType::f64);
  const std::vector<double> xv = x.to_doubles();
  const Tensor ones = Tensor::ones(x.shape(), DType::f64);
  for (const Act& act : kActs) {
    const std::vector<Ref> refs = refs_of(act, xv);
    expect_accurate(xv, refs, act.op(x), act, false, 1e-11, act.name);
    expect_accurate(xv, refs, cpu::activation_backward(act.kind, x, ones), act, true, 1e-11,
                    std::string(act.name) + " derivative");
  }
  // The tanh identity the reference uses, checked where the tanh form does not cancel.
  for (double v = -3; v <= 6; v += 0.01) {
    const double u = std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v);
    EXPECT_NEAR(gelu_tanh_ref(v).y, 0.5 * v * (1 + std::tanh(u)), 1e-15) << v;
  }
}

TEST(Activation, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const Tensor x =
      Tensor::from_doubles({inf, nan, 0.0, -0.0, 1e30, -1e30, 200, -200}, {8}, DType::f32);
  for (const Act& act : kActs) {
    const std::vector<double> y = act.op(x).to_doubles();
    EXPECT_EQ(y[0], inf) << act.name;
    EXPECT_TRUE(std::isnan(y[1])) << act.name;
    EXPECT_EQ(y[2], 0.0) << act.name;
    EXPECT_EQ(y[3], 0.0) << act.name;
    EXPECT_EQ(y[4], 1e30f) << act.name;
    EXPECT_EQ(y[5], 0.0) << act.name;  // -1e30·σ(-huge): underflows to -0
    EXPECT_EQ(y[6], 200.0) << act.name;
    EXPECT_EQ(y[7], 0.0) << act.name;
    const std::vector<double> d =
        cpu::activation_backward(act.kind, x, Tensor::ones({8})).to_doubles();
    EXPECT_TRUE(std::isnan(d[1])) << act.name;
    EXPECT_EQ(d[4], 1.0) << act.name;
    EXPECT_EQ(d[5], 0.0) << act.name;
  }
}

TEST(Activation, Gradcheck) {
  const std::vector<double> tails = {-30,  -12, -6, -3,  -1.5, -0.75, -0.2, 0,
                                     1e-3, 0.3, 1,  2.5, 6,    12,    30};
  for (const Act& act : kActs) {
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) { return act.op(in[0]); },
        {Tensor::from_doubles(tails, {15}, DType::f64).set_requires_grad(true, DType::f64)},
        std::string(act.name) + " tails");
    expect_gradcheck([&](const std::vector<Tensor>& in) { return act.op(in[0]); },
                     {grad_input({4, 7}, 1, 3.0)}, std::string(act.name) + " random");
    // A strided input, and the activation inside a chain.
    expect_gradcheck([&](const std::vector<Tensor>& in) { return act.op(in[0].transpose(0, 1)); },
                     {grad_input({3, 5}, 2, 2.0)}, std::string(act.name) + " transposed");
    expect_gradcheck([&](const std::vector<Tensor>& in) { return act.op(act.op(in[0])); },
                     {grad_input({6}, 3, 2.0)}, std::string(act.name) + " twice");
  }
  expect_gradcheck([](const std::vector<Tensor>& in) { return swiglu(in[0], in[1]); },
                   {grad_input({3, 5}, 4, 3.0), grad_input({3, 5}, 5)}, "swiglu");
  const Tensor up = randn({15}, DType::f64, 6);
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return swiglu(in[0], up); },
      {Tensor::from_doubles(tails, {15}, DType::f64).set_requires_grad(true, DType::f64)},
      "swiglu gate only");
  const Tensor gate = randn({2, 4}, DType::f64, 7, 3.0);
  expect_gradcheck([&](const std::vector<Tensor>& in) { return swiglu(gate, in[0]); },
                   {grad_input({2, 4}, 8)}, "swiglu up only");
  expect_gradcheck([](const std::vector<Tensor>& in) { return dropout(in[0], 0.4, 9, 2); },
                   {grad_input({6, 7}, 10)}, "dropout");
}

TEST(Activation, SwigluIsSiluTimesUp) {
  const Tensor gate = randn({5, 33}, DType::f32, 11, 3.0), up = randn({5, 33}, DType::f32, 12);
  const std::vector<double> g = gate.to_doubles(), u = up.to_doubles(),
                            y = swiglu(gate, up).to_doubles();
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(y[i], silu_ref(g[i]).y * u[i], 2e-6 * (1 + std::fabs(y[i]))) << i;
  // The fused backward agrees with the f64 product rule.
  Tensor g64 = gate.to(DType::f64).set_requires_grad(true, DType::f64);
  Tensor u64 = up.to(DType::f64).set_requires_grad(true, DType::f64);
  const Tensor dy = randn({5, 33}, DType::f32, 13);
  swiglu(g64, u64).backward(dy.to(DType::f64));
  auto [dgate, dup] = cpu::swiglu_backward(gate, up, dy, true, true);
  expect_close(dgate, g64.grad(), 1e-6, 2e-6, "d gate");
  expect_close(dup, u64.grad(), 1e-6, 2e-6, "d up");
  auto [only_gate, none] = cpu::swiglu_backward(gate, up, dy, true, false);
  EXPECT_FALSE(none.defined());
  EXPECT_TRUE(same_bits(only_gate, dgate));
  auto [none2, only_up] = cpu::swiglu_backward(gate, up, dy, false, true);
  EXPECT_FALSE(none2.defined());
  EXPECT_TRUE(same_bits(only_up, dup));
}

TEST(Activation, LowPrecisionIsTheF32KernelRoundedOnce) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const Tensor x = randn({7, 301}, dt, 21, 4.0), g = randn({7, 301}, dt, 22);
    const Tensor x32 = x.to(DType::f32), g32 = g.to(DType::f32);
    const double ulp = dt == DType::bf16 ? 0x1p-8 : 0x1p-10;
    for (const Act& act : kActs) {
      const std::string what = std::string(act.name) + " " + dtype_name(dt);
      const Tensor y = act.op(x);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_TRUE(same_bits(y, act.op(x32).to(dt))) << what;
      const Tensor dx = cpu::activation_backward(act.kind, x, g);
      EXPECT_EQ(dx.dtype(), dt);
      EXPECT_TRUE(same_bits(dx, cpu::activation_backward(act.kind, x32, g32).to(dt))) << what;
      // And within one rounding of the f64 math on the same values.
      expect_close(y, act.op(rounded(x, dt)), 1e-7, ulp, what + " vs f64");
      // f32 gradients into a low-precision op come back in the op's dtype.
      Tensor xl = x.detach().set_requires_grad(true, dt);
      act.op(xl).backward(g32);
      EXPECT_EQ(xl.grad().dtype(), dt);
      EXPECT_TRUE(same_bits(xl.grad(), cpu::activation_backward(act.kind, x32, g32).to(dt)))
          << what;
    }
    // Every ISA's narrow path (loads and stores inside the vector loop) against the same
    // ISA's f32 path.
    std::vector<Isa> isas{Isa::scalar};
    if (cpu_has_avx2_f16c()) isas.push_back(Isa::avx2);
    for (Isa isa : isas)
      for (const Act& act : kActs) {
        EXPECT_TRUE(same_bits(cpu::activation_forward(act.kind, x, isa),
                              cpu::activation_forward(act.kind, x32, isa).to(dt)))
            << act.name << " " << isa_name(isa);
        EXPECT_TRUE(same_bits(cpu::activation_backward(act.kind, x, g, isa),
                              cpu::activation_backward(act.kind, x32, g32, isa).to(dt)))
            << act.name << " " << isa_name(isa);
      }
    const Tensor up = randn({7, 301}, dt, 23);
    EXPECT_TRUE(same_bits(swiglu(x, up), swiglu(x32, up.to(DType::f32)).to(dt)));
    auto [a, b] = cpu::swiglu_backward(x, up, g, true, true);
    auto [a32, b32] = cpu::swiglu_backward(x32, up.to(DType::f32), g32, true, true);
    EXPECT_TRUE(same_bits(a, a32.to(dt)));
    EXPECT_TRUE(same_bits(b, b32.to(dt)));
  }
}

// bf16 / f16 activations read tables of the f32 kernel over all 65536 encodings: on every
// encoding (NaN, infinities and subnormals included), for every build, the result must be
// the f32 kernel on the widened input rounded once, bit for bit, forward and backward. Seven
// more elements after the 65536 (NaN, infinities, subnormals, zeros, a normal) put special
// values in the kernels' partial last vector too.
constexpr int64_t kEncodingsAndTail = (1 << 16) + 7;

Tensor every_encoding(DType dt) {
  Tensor x = Tensor::empty({kEncodingsAndTail}, dt);
  auto* bits = static_cast<uint16_t*>(x.raw_data());
  for (uint32_t b = 0; b < (1u << 16); ++b) bits[b] = static_cast<uint16_t>(b);
  const uint16_t tail[7] = {0x7E01, 0xFC00, 0x7F80, 0x0001, 0x8003, 0x8000, 0x3C00};
  for (int j = 0; j < 7; ++j) bits[(1 << 16) + j] = tail[j];
  return x;
}

// The upstream gradients (or `up` factors) to pair with every encoding: each constant, then
// N(0, 1) draws. NaN is left out: NaN · NaN may keep either payload.
std::vector<Tensor> factors_for(DType dt) {
  std::vector<Tensor> f;
  for (double v : {1.0, -1.0, 0.0, -0.0, 0.375, 3e4, 1e-7, double(INFINITY), -double(INFINITY)})
    f.push_back(Tensor::full({kEncodingsAndTail}, v, dt));
  f.push_back(randn({kEncodingsAndTail}, dt, 91));
  return f;
}

// Same bits, except that a NaN may differ from a NaN in sign and payload: where two NaNs meet
// in a product (x·σ(x) at a NaN x) x86 returns one of them, and which one depends on the
// operand order the compiler chose for that kernel.
bool same_bits_or_both_nan(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const std::vector<double> av = a.to_doubles(), bv = b.to_doubles();
  const auto* ab = static_cast<const uint16_t*>(a.raw_data());
  const auto* bb = static_cast<const uint16_t*>(b.raw_data());
  for (size_t i = 0; i < av.size(); ++i)
    if (ab[i] != bb[i] && !(std::isnan(av[i]) && std::isnan(bv[i]))) {
      ADD_FAILURE() << "element " << i << ": " << av[i] << " vs " << bv[i];
      return false;
    }
  return true;
}

TEST(Activation, LowPrecisionTablesAreTheF32KernelOnEveryEncoding) {
  std::vector<Isa> isas{Isa::scalar, Isa::best};
  if (cpu_has_avx2_f16c()) isas.push_back(Isa::avx2);
  for (DType dt : {DType::bf16, DType::f16}) {
    const Tensor x = every_encoding(dt), x32 = x.to(DType::f32);
    const std::vector<Tensor> factors = factors_for(dt);
    for (Isa isa : isas) {
      const std::string where = std::string(dtype_name(dt)) + " " + isa_name(isa);
      for (const Act& act : kActs) {
        EXPECT_TRUE(same_bits_or_both_nan(cpu::activation_forward(act.kind, x, isa),
                                          cpu::activation_forward(act.kind, x32, isa).to(dt)))
            << act.name << " " << where;
        for (const Tensor& g : factors)
          EXPECT_TRUE(same_bits_or_both_nan(
              cpu::activation_backward(act.kind, x, g, isa),
              cpu::activation_backward(act.kind, x32, g.to(DType::f32), isa).to(dt)))
              << act.name << " backward " << where << " g[0] = " << g.to_doubles()[0];
      }
      for (const Tensor& up : factors) {
        const Tensor up32 = up.to(DType::f32);
        EXPECT_TRUE(same_bits_or_both_nan(cpu::swiglu_forward(x, up, isa),
                                          cpu::swiglu_forward(x32, up32, isa).to(dt)))
            << "swiglu " << where;
        const Tensor& g = factors.back();
        auto [dgate, dup] = cpu::swiglu_backward(x, up, g, true, true, isa);
        auto [dgate32, dup32] = cpu::swiglu_backward(x32, up32, g.to(DType::f32), true, true, isa);
        EXPECT_TRUE(same_bits_or_both_nan(dgate, dgate32.to(dt))) << "swiglu dgate " << where;
        EXPECT_TRUE(same_bits_or_both_nan(dup, dup32.to(dt))) << "swiglu dup " << where;
      }
    }
  }
}

// ---- dropout ------------------------------------------------------------------------------

uint32_t threshold_of(double p) {
  return static_cast<uint32_t>(std::ldexp(p, 32));  // floor: p·2^32 < 2^32
}

TEST(Dropout, MaskIsPhiloxOfTheElementIndex) {
  const double p = 0.3;
  const float keep_scale = static_cast<float>(1 / (1 - p));
  // 3·5003 elements: several parallel chunks and a ragged tail.
  const Tensor x = randn({3, 5003}, DType::f32, 31);
  const std::vector<double> xv = x.to_doubles(), yv = dropout(x, p, 1234, 5).to_doubles();
  for (size_t i = 0; i < xv.size(); ++i) {
    const bool keep = philox_u32(1234, 5, i) >= threshold_of(p);
    const double want = keep ? static_cast<double>(static_cast<float>(xv[i]) * keep_scale) : 0.0;
    ASSERT_EQ(yv[i], want) << i;
  }
  // bf16 keeps the same elements, each x·scale computed in f32 and rounded once.
  const Tensor xb = x.to(DType::bf16);
  const std::vector<double> xbv = xb.to_doubles(), ybv = dropout(xb, p, 1234, 5).to_doubles();
  for (size_t i = 0; i < xbv.size(); ++i) {
    const bool keep = philox_u32(1234, 5, i) >= threshold_of(p);
    const float prod = static_cast<float>(xbv[i]) * keep_scale;
    ASSERT_EQ(ybv[i], keep ? static_cast<double>(static_cast<float>(bf16(prod))) : 0.0) << i;
  }
  EXPECT_EQ(cpu::dropout_threshold(p), threshold_of(p));
  EXPECT_EQ(cpu::dropout_threshold(0.0), 0u);
  EXPECT_EQ(cpu::dropout_threshold(std::nextafter(1.0, 0.0)), 0xFFFFFFFFu);
}

TEST(Dropout, DropFractionIsNearP) {
  const int64_t n = 1 << 18;
  const Tensor x = Tensor::ones({n});
  for (double p : {0.01, 0.1, 0.5, 0.9}) {
    const std::vector<double> y = dropout(x, p, 77, 0).to_doubles();
    int64_t dropped = 0;
    for (double v : y) dropped += v == 0.0;
    const double sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(dropped), n * p, 6 * sd) << "p = " << p;
    // Mean preserved: kept elements carry 1/(1-p).
    double total = 0;
    for (double v : y) total += v;
    EXPECT_NEAR(total / n, 1.0, 6 * std::sqrt(p / (1 - p) / n)) << "p = " << p;
  }
}

TEST(Dropout, SeedsAndStreams) {
  const Tensor x = Tensor::ones({4096});
  const Tensor a = dropout(x, 0.5, 1, 0);
  EXPECT_TRUE(same_bits(a, dropout(x, 0.5, 1, 0)));  // a pure function of (seed, stream, i)
  auto differing = [&](const Tensor& b) {
    const std::vector<double> av = a.to_doubles(), bv = b.to_doubles();
    int d = 0;
    for (size_t i = 0; i < av.size(); ++i) d += av[i] != bv[i];
    return d;
  };
  EXPECT_GT(differing(dropout(x, 0.5, 2, 0)), 1500);  // about half of 4096
  EXPECT_GT(differing(dropout(x, 0.5, 1, 1)), 1500);
  EXPECT_GT(differing(dropout(x, 0.5, 1ull << 40, 0)), 1500);  // high seed bits count
  EXPECT_GT(differing(dropout(x, 0.5, 1, 1ull << 40)), 1500);
  // The index is the logical row-major one, whatever the layout.
  const Tensor base = randn({64, 48}, DType::f32, 41);
  EXPECT_TRUE(same_bits(dropout(base.transpose(0, 1), 0.5, 3, 4),
                        dropout(base.transpose(0, 1).contiguous(), 0.5, 3, 4)));
}

TEST(Dropout, PZeroReturnsTheInput) {
  Tensor x = randn({5, 6}, DType::bf16, 51).set_requires_grad(true, DType::bf16);
  const Tensor y = dropout(x, 0.0, 1, 2);
  EXPECT_TRUE(y.shares_storage_with(x));
  EXPECT_TRUE(same_bits(y, x));
}

TEST(Dropout, GradientIsMaskTimesScale) {
  for (DType dt : {DType::f64, DType::f32, DType::bf16}) {
    Tensor x = Tensor::ones({3, 1000}, dt).set_requires_grad(true, dt);
    const Tensor y = dropout(x, 0.25, 8, 9);
    const Tensor g = randn({3, 1000}, dt, 61);
    y.backward(g);
    const std::vector<double> yv = y.to_doubles(), gv = g.to_doubles(), dx = x.grad().to_doubles();
    EXPECT_EQ(x.grad().dtype(), dt);
    for (size_t i = 0; i < yv.size(); ++i) {
      // y = mask·scale (x is 1), so the gradient is g·y rounded once.
      const double want =
          dt == DType::f64 ? gv[i] * yv[i]
          : dt == DType::f32
              ? static_cast<double>(static_cast<float>(gv[i]) * static_cast<float>(1 / 0.75))
              : static_cast<double>(static_cast<float>(
                    bf16(static_cast<float>(gv[i]) * static_cast<float>(1 / 0.75))));
      ASSERT_EQ(dx[i], yv[i] == 0 ? 0.0 : want) << dtype_name(dt) << " " << i;
    }
  }
}

TEST(Activation, SameBitsWithOneAndTwoThreadsAndAcrossIsas) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x0 = randn({80, 1000}, dt, 71, 3.0), u0 = randn({80, 1000}, dt, 72);
    const Tensor g = randn({80, 1000}, dt, 73);
    auto run = [&] {
      std::vector<Tensor> out;
      for (const Act& act : kActs) {
        Tensor x = x0.detach().set_requires_grad(true, dt);
        Tensor y = act.op(x);
        y.backward(g);
        out.push_back(y);
        out.push_back(x.grad());
      }
      Tensor gate = x0.detach().set_requires_grad(true, dt);
      Tensor up = u0.detach().set_requires_grad(true, dt);
      Tensor s = swiglu(gate, up);
      s.backward(g);
      Tensor xd = u0.detach().set_requires_grad(true, dt);
      Tensor d = dropout(xd, 0.2, 5, 6);
      d.backward(g);
      for (const Tensor& t : {s, gate.grad(), up.grad(), d, xd.grad()}) out.push_back(t);
      return out;
    };
    const auto one = testing::with_threads(1, run), two = testing::with_threads(2, run);
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(same_bits(one[i], two[i])) << dtype_name(dt) << " tensor " << i;
  }
  // The AVX2 and AVX-512 builds use FMA the same way and agree bit for bit (the SSE2 build
  // rounds products separately; F32ApproximationsMatchF64Formulas covers its accuracy).
  // Dropout is integer work: every build gives the same mask.
  const Tensor x = randn({3, 4001}, DType::f32, 81, 4.0), g = randn({3, 4001}, DType::f32, 82);
  for (const Act& act : kActs) {
    const Tensor best = cpu::activation_forward(act.kind, x, Isa::best);
    if (cpu_has_avx2_f16c()) {
      EXPECT_TRUE(same_bits(best, cpu::activation_forward(act.kind, x, Isa::avx2))) << act.name;
      EXPECT_TRUE(same_bits(cpu::activation_backward(act.kind, x, g, Isa::best),
                            cpu::activation_backward(act.kind, x, g, Isa::avx2)))
          << act.name;
    }
  }
  EXPECT_TRUE(same_bits(cpu::dropout_forward(x, 0.3, 1, 2, Isa::scalar),
                        cpu::dropout_forward(x, 0.3, 1, 2, Isa::best)));
  if (cpu_has_avx2_f16c()) {
    EXPECT_TRUE(same_bits(cpu::dropout_forward(x, 0.3, 1, 2, Isa::avx2),
                          cpu::dropout_forward(x, 0.3, 1, 2, Isa::best)));
  }
}

TEST(Activation, BadInputIsAnError) {
  const Tensor x = Tensor::ones({2, 3});
  for (const Act& act : kActs) {
    EXPECT_THROW(act.op(Tensor()), Error);
    EXPECT_THROW(act.op(Tensor::ones({2}, DType::i32)), Error);
    EXPECT_THROW(act.op(Tensor::ones({2}, DType::f8_e5m2)), Error);
    EXPECT_THROW(act.op(Tensor::empty({2}, DType::f32, Device::meta)), Error);
    EXPECT_THROW(cpu::activation_backward(act.kind, x, Tensor::ones({3, 2})), Error);
  }
  EXPECT_THROW(swiglu(x, Tensor::ones({3, 2})), Error);
  EXPECT_THROW(swiglu(x, Tensor::ones({2, 3}, DType::bf16)), Error);
  EXPECT_THROW(swiglu(x, Tensor()), Error);
  EXPECT_THROW(dropout(x, -0.1, 1), Error);
  EXPECT_THROW(dropout(x, 1.0, 1), Error);
  EXPECT_THROW(dropout(x, std::nan(""), 1), Error);
  EXPECT_THROW(dropout(Tensor::ones({2}, DType::i64), 0.5, 1), Error);
  EXPECT_THROW(dropout(Tensor(), 0.5, 1), Error);
  EXPECT_THROW(cpu::dropout_backward(x, 0.5, 1, 0, DType::i32), Error);
}

}  // namespace
}  // namespace mixprec
