// softmax / log_softmax: f64 gradient checks, values against plain f64 loops, extreme logits
// (±80, ~100), low precision against the f32 kernel on the same rounded inputs, any dim,
// thread-count independence, the row kernels of every ISA (exp accuracy), bad input.
#include "mixprec/ops/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cpu/softmax_row_ops.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

// Plain f64 loops over x viewed as [rows, D] (the last dim).
std::vector<double> reference(const Tensor& x, bool log) {
  const std::vector<double> v = x.to_doubles();
  const auto D = static_cast<size_t>(x.size(-1));
  std::vector<double> out(v.size());
  for (size_t r = 0; r < v.size() / D; ++r) {
    const double* row = v.data() + r * D;
    double m = -INFINITY, s = 0;
    for (size_t i = 0; i < D; ++i) m = std::max(m, row[i]);
    for (size_t i = 0; i < D; ++i) s += std::exp(row[i] - m);
    for (size_t i = 0; i < D; ++i)
      out[r * D + i] = log ? (row[i] - m) - std::log(s) : std::exp(row[i] - m) / s;
  }
  return out;
}

Tensor ref_tensor(const Tensor& x, bool log) {
  return Tensor::from_doubles(reference(x, log), x.shape(), DType::f64);
}

// [6, 13] like the PyTorch fixtures: ordinary rows, a row of ±80 and a row around 100.
Tensor extreme_logits(DType dt) {
  std::vector<double> v = randn({6, 13}, DType::f64, 7, 2.0).to_doubles();
  const std::vector<double> noise = randn({13}, DType::f64, 8).to_doubles();
  for (size_t i = 0; i < 13; ++i) {
    v[4 * 13 + i] = (i % 2 == 0 ? 80.0 : -80.0) + noise[i];
    v[5 * 13 + i] = 100.0 + noise[i];
  }
  return Tensor::from_doubles(v, {6, 13}, dt);
}

Tensor apply(bool log, const Tensor& x, int64_t dim = -1) {
  return log ? log_softmax(x, dim) : softmax(x, dim);
}

TEST(Softmax, Gradcheck) {
  for (bool log : {false, true}) {
    const char* name = log ? "log_softmax" : "softmax";
    for (int64_t dim : {-1, 0, 1}) {
      expect_gradcheck([&](const std::vector<Tensor>& in) { return apply(log, in[0], dim); },
                       {grad_input({3, 4, 5}, 1)},
                       std::string(name) + " dim " + std::to_string(dim));
    }
    Tensor x = extreme_logits(DType::f64);
    x.set_requires_grad(true, DType::f64);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return apply(log, in[0]); }, {x},
                     std::string(name) + " extreme logits");
    Tensor s = Tensor::full({}, 0.3, DType::f64);
    s.set_requires_grad(true, DType::f64);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return apply(log, in[0]); }, {s},
                     std::string(name) + " 0-d");
  }
}

TEST(Softmax, MatchesF64LoopsIncludingExtremeLogits) {
  for (bool log : {false, true}) {
    for (DType dt : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
      const std::string what = std::string(log ? "log_softmax " : "softmax ") + dtype_name(dt);
      // f16 cannot hold 80 + noise exactly, but the reference sees the same rounded values.
      for (const Tensor& x : {extreme_logits(dt), randn({5, 301}, dt, 3, 3.0)}) {
        const Tensor y = apply(log, x);
        EXPECT_EQ(y.dtype(), dt);
        const Tensor ref = ref_tensor(rounded(x, dt), log);
        for (double v : y.to_doubles()) EXPECT_TRUE(std::isfinite(v)) << what;
        // f32 math: exp polynomial < 2^-22, sums ~1e-7; then one rounding into dt. log-softmax
        // is an absolute error on values up to ~180 in magnitude.
        const double out_ulp = dt == DType::f64    ? 0x1p-52
                               : dt == DType::f32  ? 0x1p-23
                               : dt == DType::bf16 ? 0x1p-8
                                                   : 0x1p-11;
        const double rtol = dt == DType::f64 ? 1e-14 : out_ulp + 2e-6;
        const double atol =
            log ? (dt == DType::f64 ? 1e-13 : 4e-6) : (dt == DType::f16 ? 0x1p-24 : 1e-30);
        expect_close(y, ref, atol, rtol, what);
      }
    }
  }
}

TEST(Softmax, LowPrecisionEqualsF32KernelRounded) {
  // bf16/f16 rows are widened exactly, computed in f32 and rounded once. Backward recomputes
  // the probabilities from the saved input and f32 row statistics, so both passes give the
  // bits of the f32 kernel on the widened values, rounded into dt.
  for (bool log : {false, true}) {
    for (DType dt : {DType::bf16, DType::f16}) {
      const std::string what = std::string(log ? "log_softmax " : "softmax ") + dtype_name(dt);
      Tensor x = randn({7, 77}, dt, 11, 2.0).set_requires_grad(true, dt);
      Tensor x32 = x.detach().to(DType::f32).set_requires_grad();
      const Tensor gy = randn({7, 77}, dt, 12);
      Tensor y = apply(log, x), y32 = apply(log, x32);
      y.backward(gy);
      y32.backward(gy.to(DType::f32));
      EXPECT_TRUE(same_bits(y, y32.to(dt))) << what << " forward";
      EXPECT_EQ(x.grad().dtype(), dt);
      EXPECT_TRUE(same_bits(x.grad(), x32.grad().to(dt))) << what << " backward";
      // And the exact math on the rounded inputs, within one rounding plus f32 error.
      const std::vector<double> p = reference(x.detach(), false), gv = gy.to_doubles();
      std::vector<double> ref(p.size());
      for (size_t r = 0; r < 7; ++r) {
        double dot = 0, sum = 0;
        for (size_t i = 0; i < 77; ++i)
          dot += gv[r * 77 + i] * p[r * 77 + i], sum += gv[r * 77 + i];
        for (size_t i = 0; i < 77; ++i) {
          const size_t k = r * 77 + i;
          ref[k] = log ? gv[k] - p[k] * sum : p[k] * (gv[k] - dot);
        }
      }
      const double ulp = dt == DType::bf16 ? 0x1p-8 : 0x1p-11;
      expect_close(x.grad(), Tensor::from_doubles(ref, {7, 77}, DType::f64), 1e-6, ulp + 1e-6,
                   what + " backward vs f64");
    }
  }
}

TEST(Softmax, AnyDimMatchesLastDimOfTransposed) {
  for (bool log : {false, true}) {
    const Tensor x = randn({4, 9, 6}, DType::f32, 21, 2.0);
    for (int64_t dim : {0, 1, -2}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      const Tensor want = apply(log, x.transpose(d, 2).contiguous()).transpose(d, 2);
      const Tensor got = apply(log, x, dim);
      EXPECT_TRUE(got.is_contiguous());
      EXPECT_TRUE(same_bits(got, want.contiguous())) << "dim " << dim;
    }
    // Gradients through a non-last dim agree with the transposed computation too.
    Tensor a = randn({4, 9, 6}, DType::f32, 22).set_requires_grad();
    Tensor b = a.detach().clone().set_requires_grad();
    const Tensor gy = randn({4, 9, 6}, DType::f32, 23);
    apply(log, a, 1).backward(gy);
    apply(log, b.transpose(1, 2), -1).transpose(1, 2).backward(gy);
    expect_close(a.grad(), b.grad(), 1e-7, 1e-6, "grad along dim 1");
  }
}

TEST(Softmax, SpecialValues) {
  // A NaN poisons its row only; -inf logits get probability 0; a 0-d tensor is 1 (log 0).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = Tensor::from_doubles({1, nan, 2, 0, -INFINITY, 3}, {2, 3}, DType::f32);
  const std::vector<double> y = softmax(x).to_doubles(), ly = log_softmax(x).to_doubles();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[i]) && std::isnan(ly[i]));
  EXPECT_EQ(y[4], 0.0);
  EXPECT_EQ(ly[4], -INFINITY);
  EXPECT_NEAR(y[5], std::exp(3.0) / (1 + std::exp(3.0)), 1e-7);
  EXPECT_EQ(softmax(Tensor::full({}, 5.0)).item(), 1.0);
  EXPECT_EQ(log_softmax(Tensor::full({}, 5.0)).item(), 0.0);
  // Empty tensors pass through.
  EXPECT_EQ(softmax(Tensor::zeros({0, 4})).shape(), (Shape{0, 4}));
}

TEST(Softmax, SameBitsWithOneAndTwoThreads) {
  for (bool log : {false, true}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      auto run = [&] {
        Tensor x = randn({64, 3000}, dt, 31, 3.0).set_requires_grad(true, dt);
        Tensor y = apply(log, x);
        y.backward(randn({64, 3000}, dt, 32));
        return std::vector<Tensor>{y, x.grad()};
      };
      const auto one = with_threads(1, run), two = with_threads(2, run);
      EXPECT_TRUE(same_bits(one[0], two[0])) << dtype_name(dt) << " forward";
      EXPECT_TRUE(same_bits(one[1], two[1])) << dtype_name(dt) << " backward";
    }
  }
}

TEST(Softmax, GradientOfAnotherDtypeIsAccepted) {
  // An f32 gradient flowing into a bf16 op, and an f64 one.
  Tensor x = randn({3, 10}, DType::bf16, 41).set_requires_grad(true, DType::bf16);
  const Tensor g = randn({3, 10}, DType::f32, 42);
  softmax(x).backward(g);
  const Tensor from_f32 = x.grad();
  EXPECT_EQ(from_f32.dtype(), DType::bf16);
  x.set_grad(Tensor());
  softmax(x).backward(g.to(DType::f64));
  EXPECT_TRUE(same_bits(x.grad(), from_f32));
}

TEST(Softmax, BadInputIsAnError) {
  EXPECT_THROW(softmax(Tensor::ones({2, 3}), 2), Error);
  EXPECT_THROW(log_softmax(Tensor::ones({2, 3}), -3), Error);
  EXPECT_THROW(softmax(Tensor::ones({2, 3}, DType::i32)), Error);
  EXPECT_THROW(softmax(Tensor::ones({2, 3}, DType::f8_e4m3fn)), Error);
  EXPECT_THROW(softmax(Tensor()), Error);
  EXPECT_THROW(softmax(Tensor::full({}, 1.0), 1), Error);
}

// ---- the row kernels of each ISA this CPU runs ----

std::vector<cpu::RowIsa> isas() {
  std::vector<cpu::RowIsa> out;
  for (auto isa :
       {cpu::RowIsa::portable, cpu::RowIsa::avx2, cpu::RowIsa::avx512, cpu::RowIsa::avx512_bf16})
    if (cpu::row_isa_supported(isa)) out.push_back(isa);
  return out;
}

TEST(SoftmaxRowOps, ExpRelativeErrorBelow2PowMinus23) {
  // 2^18 evenly spaced points of [-87, 88], every binade of tiny |x|, and the reduction
  // interval's ends.
  std::vector<float> x;
  const int steps = 1 << 18;
  for (int k = 0; k <= steps; ++k) x.push_back(-87.0f + 175.0f * static_cast<float>(k) / steps);
  for (int e = -126; e < 0; ++e)
    for (float m : {1.0f, 1.3f, 1.7f})
      x.push_back(std::ldexp(m, e)), x.push_back(-std::ldexp(m, e));
  for (float v : {0.0f, -0.0f, 0.34657359f, -0.34657359f, 0.34657362f, -0.34657362f})
    x.push_back(v);
  for (cpu::RowIsa isa : isas()) {
    std::vector<float> y(x.size());
    cpu::row_ops_f32(isa).exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      const double err = std::fabs(y[i] - want) / want;
      if (err > worst) worst = err, at = i;
    }
    EXPECT_LT(worst, 0x1p-23) << cpu::row_isa_name(isa) << " at x = " << x[at];
  }
}

TEST(SoftmaxRowOps, ExpEdgeCases) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {nan, -INFINITY, -1000.0f, -88.5f, -87.3f, 88.3f};
  for (cpu::RowIsa isa : isas()) {
    std::vector<float> y(x.size());
    cpu::row_ops_f32(isa).exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
    const char* name = cpu::row_isa_name(isa);
    EXPECT_TRUE(std::isnan(y[0])) << name;
    EXPECT_EQ(y[1], 0.0f) << name;
    EXPECT_EQ(y[2], 0.0f) << name;
    EXPECT_LT(y[3], 0x1p-126f) << name;
    EXPECT_NEAR(y[4] / std::exp(static_cast<double>(x[4])), 1.0, 1e-6) << name;
    EXPECT_NEAR(y[5] / std::exp(88.0), 1.0, 1e-6) << name;  // clamped at 88
  }
}

TEST(SoftmaxRowOps, ExpUnderflowsGraduallyOnAvx512) {
  // Below -87.3 the result is under 2^-126. AVX-512 scales by 2^n with vscalefps, rounding
  // once, so it stays within 2^-148 of exp(x) down to 0; the other builds may flush to 0.
  std::vector<float> x;
  for (int k = 0; k <= 4000; ++k) x.push_back(-87.34f - 17.0f * static_cast<float>(k) / 4000);
  for (cpu::RowIsa isa : isas()) {
    std::vector<float> y(x.size());
    cpu::row_ops_f32(isa).exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
    const bool gradual = isa == cpu::RowIsa::avx512 || isa == cpu::RowIsa::avx512_bf16;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      ASSERT_GE(y[i], 0.0f) << cpu::row_isa_name(isa) << " at x = " << x[i];
      ASSERT_LT(y[i], 0x1p-126f) << cpu::row_isa_name(isa) << " at x = " << x[i];
      if (gradual) {
        ASSERT_NEAR(y[i], want, 0x1p-148) << cpu::row_isa_name(isa) << " at x = " << x[i];
      }
    }
  }
}

TEST(SoftmaxRowOps, EveryIsaAgreesWithF64OnEveryLength) {
  // Lengths around the vector widths exercise the partial-vector tails.
  for (int64_t n : {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100}) {
    const std::vector<double> v =
        randn({n}, DType::f32, static_cast<uint64_t>(n), 4.0).to_doubles();
    const std::vector<float> x(v.begin(), v.end());
    double m = -INFINITY, s = 0, sum = 0, dot = 0;
    for (double e : v) m = std::max(m, e), sum += e, dot += e * e;
    for (double e : v) s += std::exp(e - m);
    for (cpu::RowIsa isa : isas()) {
      const auto& ops = cpu::row_ops_f32(isa);
      const auto& rows = cpu::stored_row_ops<float>(isa);  // row algorithms, in place
      const std::string what = std::string(cpu::row_isa_name(isa)) + " n=" + std::to_string(n);
      EXPECT_EQ(ops.max(x.data(), n), static_cast<float>(m)) << what;
      EXPECT_NEAR(ops.sum(x.data(), n), sum, 1e-5 * (1 + std::fabs(sum)) + 1e-6 * n) << what;
      EXPECT_NEAR(ops.dot(x.data(), x.data(), n), dot, 1e-6 * dot) << what;
      std::vector<float> e(x.size());
      EXPECT_NEAR(ops.exp_shifted_sum(x.data(), static_cast<float>(m), e.data(), n), s, 1e-6 * s)
          << what;
      std::vector<float> p = x, lp = x;
      float pm, pls, lm, lls;
      rows.softmax(p.data(), p.data(), p.data(), 1, n, &pm, &pls);
      rows.log_softmax(lp.data(), lp.data(), nullptr, 1, n, &lm, &lls);  // buf: lp
      EXPECT_EQ(pm, static_cast<float>(m)) << what;
      EXPECT_EQ(lm, static_cast<float>(m)) << what;
      EXPECT_NEAR(pls, std::log(s), 1e-6) << what;
      EXPECT_EQ(lls, pls) << what;
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = std::exp(v[i] - m) / s;
        EXPECT_NEAR(e[i], std::exp(v[i] - m), 1e-6 * std::exp(v[i] - m)) << what;
        EXPECT_NEAR(p[i], want, 1e-6 * want) << what;
        EXPECT_NEAR(lp[i], std::log(want), 1e-6 * (1 + std::fabs(std::log(want)))) << what;
      }
      // Backward rows from the input and its statistics, against f64.
      const std::vector<double> gd = randn({n}, DType::f32, 99).to_doubles();
      const std::vector<float> g(gd.begin(), gd.end());
      double dot = 0, gsum = 0;
      for (size_t i = 0; i < x.size(); ++i) dot += gd[i] * std::exp(v[i] - m) / s, gsum += gd[i];
      std::vector<float> dx = x, ldx = x;
      rows.softmax_backward(dx.data(), g.data(), dx.data(), dx.data(), n, pm, pls);
      rows.log_softmax_backward(ldx.data(), g.data(), ldx.data(), n, pm, pls);
      for (size_t i = 0; i < x.size(); ++i) {
        const double p_i = std::exp(v[i] - m) / s;
        EXPECT_NEAR(dx[i], p_i * (gd[i] - dot), 2e-6 * p_i * (1 + std::fabs(gd[i] - dot))) << what;
        EXPECT_NEAR(ldx[i], gd[i] - p_i * gsum, 2e-6 * (1 + std::fabs(gsum))) << what;
      }
    }
  }
}

TEST(SoftmaxRowOps, NormAndCrossEntropyRowsOfEveryIsaMatchF64Rows) {
  // The f64 rows (checked end to end by the gradchecks) are the reference for the f32 rows of
  // each ISA, including the ones the op tests do not reach on this CPU.
  const auto& ref = cpu::stored_row_ops<double>();
  for (int64_t n : {1, 5, 8, 13, 16, 37, 64, 200}) {
    auto values = [&](uint64_t seed, double scale) {
      return randn({n}, DType::f32, seed, scale).to_doubles();
    };
    const std::vector<double> xd = values(1, 3.0), gd = values(2, 1.0), wd = values(3, 1.0),
                              bd = values(4, 1.0);
    const std::vector<float> xf(xd.begin(), xd.end()), gf(gd.begin(), gd.end()),
        wf(wd.begin(), wd.end()), bf(bd.begin(), bd.end());
    for (cpu::RowIsa isa : isas()) {
      const auto& ops = cpu::stored_row_ops<float>(isa);  // in place
      const std::string what = std::string(cpu::row_isa_name(isa)) + " n=" + std::to_string(n);
      // |got - want| <= tol * (largest |want| + floor), elementwise.
      auto close = [&](const std::vector<float>& got, const std::vector<double>& want, double tol,
                       const char* name, double floor = 0) {
        double scale = floor;
        for (double v : want) scale = std::max(scale, std::fabs(v));
        for (size_t i = 0; i < want.size(); ++i)
          EXPECT_NEAR(got[i], want[i], tol * scale) << what << " " << name << " " << i;
      };
      double gw = 0;  // the size of the terms dx cancels
      for (size_t i = 0; i < gd.size(); ++i) gw = std::max(gw, std::fabs(gd[i] * wd[i]));
      for (bool center : {false, true}) {
        // Forward, then backward with dw/db sums and dx.
        std::vector<float> y = xf;
        std::vector<double> yd = xd;
        float mean = 0, rstd = 0;
        double mean_d = 0, rstd_d = 0;
        ops.norm_forward(y.data(), y.data(), wf.data(), bf.data(), n, 1e-5f, center, &mean, &rstd);
        ref.norm_forward(yd.data(), yd.data(), wd.data(), bd.data(), n, 1e-5, center, &mean_d,
                         &rstd_d);
        close(y, yd, 2e-6, "norm forward");
        EXPECT_NEAR(rstd, rstd_d, 2e-6 * rstd_d) << what;
        std::vector<float> dx = xf, g = gf, dw(static_cast<size_t>(n), 1.0f), db = dw;
        std::vector<double> dxd = xd, g64 = gd, dwd(static_cast<size_t>(n), 1.0), dbd = dwd;
        ops.norm_backward(dx.data(), g.data(), wf.data(), mean, rstd, n, center, dw.data(),
                          db.data(), dx.data());
        ref.norm_backward(dxd.data(), g64.data(), wd.data(), mean_d, rstd_d, n, center, dwd.data(),
                          dbd.data(), dxd.data());
        close(dx, dxd, 4e-6, "norm dx", gw * rstd_d);
        close(dw, dwd, 2e-6, "norm dw");
        close(db, dbd, 1e-7, "norm db");
      }
      // Cross-entropy row: loss, then the gradient row.
      float m = 0, ls = 0;
      double md = 0, lsd = 0;
      const int64_t target = n / 2;
      const float loss = ops.ce_forward(xf.data(), n, target, &m, &ls);
      const double loss_d = ref.ce_forward(xd.data(), n, target, &md, &lsd);
      EXPECT_NEAR(loss, loss_d, 1e-6 * (1 + std::fabs(loss_d))) << what;
      std::vector<float> ce = xf;
      std::vector<double> ced = xd;
      ops.ce_backward(ce.data(), ce.data(), n, target, m, ls, 0.25f);
      ref.ce_backward(ced.data(), ced.data(), n, target, md, lsd, 0.25);
      close(ce, ced, 1e-6, "ce backward");
      std::vector<float> sum = xf;
      cpu::row_ops_f32(isa).add(sum.data(), gf.data(), n);
      for (size_t i = 0; i < xf.size(); ++i) EXPECT_EQ(sum[i], xf[i] + gf[i]) << what;
    }
  }
}

}  // namespace
}  // namespace mixprec
