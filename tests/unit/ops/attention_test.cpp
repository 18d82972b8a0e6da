// scaled_dot_product_attention: f64 gradient checks, a naive f64 reference that materialises
// the full T×T matrix (forward and the textbook softmax backward), low precision vs the f32
// kernel on the same rounded inputs (products widened, or native bf16 within the rounding of
// P), thread-count independence, the exp helper, bad input.
#include "mixprec/ops/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "mixprec/cpu/attention.h"
#include "support/bf16_products.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

struct Reference {
  Tensor out, dq, dk, dv;  // f64
};

// The unfused math in f64 with the whole probability matrix per head:
//   P = softmax(mask(q kᵀ s)), out = P v,  dP = dO vᵀ, dS = P ∘ (dP - rowsum(P ∘ dP)),
//   dq = s·dS k, dk = s·dSᵀ q, dv = Pᵀ dO.
Reference naive(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, bool causal,
                double scale = 0) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  if (scale <= 0) scale = 1.0 / std::sqrt(static_cast<double>(D));
  const std::vector<double> Q = q.to_doubles(), K = k.to_doubles(), V = v.to_doubles(),
                            G = dout.to_doubles();
  std::vector<double> O(Q.size()), dQ(Q.size()), dK(Q.size()), dV(Q.size());
  std::vector<double> P(T * T), dS(T * T);
  for (int64_t h = 0; h < B * H; ++h) {
    const int64_t o = h * T * D;
    for (int64_t i = 0; i < T; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < T; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += Q[o + i * D + d] * K[o + j * D + d];
        P[i * T + j] = (causal && j > i) ? -INFINITY : s * scale;
        mx = std::max(mx, P[i * T + j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < T; ++j) sum += (P[i * T + j] = std::exp(P[i * T + j] - mx));
      for (int64_t j = 0; j < T; ++j) P[i * T + j] /= sum;
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < T; ++j) acc += P[i * T + j] * V[o + j * D + d];
        O[o + i * D + d] = acc;
      }
      double pdp = 0;
      for (int64_t j = 0; j < T; ++j) {
        double dp = 0;
        for (int64_t d = 0; d < D; ++d) dp += G[o + i * D + d] * V[o + j * D + d];
        dS[i * T + j] = dp;
        pdp += P[i * T + j] * dp;
      }
      for (int64_t j = 0; j < T; ++j) dS[i * T + j] = P[i * T + j] * (dS[i * T + j] - pdp);
    }
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j)
        for (int64_t d = 0; d < D; ++d) {
          dQ[o + i * D + d] += scale * dS[i * T + j] * K[o + j * D + d];
          dK[o + j * D + d] += scale * dS[i * T + j] * Q[o + i * D + d];
          dV[o + j * D + d] += P[i * T + j] * G[o + i * D + d];
        }
  }
  auto make = [&](const std::vector<double>& x) {
    return Tensor::from_doubles(x, q.shape(), DType::f64);
  };
  return {make(O), make(dQ), make(dK), make(dV)};
}

struct OpResult {
  Tensor out, dq, dk, dv;
};

// Forward + backward of the op; gradients of q, k, v kept in `grad_dtype`.
OpResult run_op(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& dout,
                bool causal, DType grad_dtype, double scale = 0) {
  Tensor q = q0.detach().set_requires_grad(true, grad_dtype);
  Tensor k = k0.detach().set_requires_grad(true, grad_dtype);
  Tensor v = v0.detach().set_requires_grad(true, grad_dtype);
  Tensor out = scaled_dot_product_attention(q, k, v, causal, scale);
  out.backward(dout);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

TEST(Attention, GradcheckF64) {
  auto sdpa = [](bool causal, double scale = 0) {
    return [=](const std::vector<Tensor>& in) {
      return scaled_dot_product_attention(in[0], in[1], in[2], causal, scale);
    };
  };
  for (bool causal : {true, false}) {
    const std::string what = causal ? "causal" : "non-causal";
    expect_gradcheck(
        sdpa(causal),
        {grad_input({2, 2, 7, 5}, 1), grad_input({2, 2, 7, 5}, 2), grad_input({2, 2, 7, 5}, 3)},
        what + " [2,2,7,5]");
    // 70 rows: two query and key blocks, the second one partial.
    expect_gradcheck(
        sdpa(causal),
        {grad_input({1, 1, 70, 3}, 4), grad_input({1, 1, 70, 3}, 5), grad_input({1, 1, 70, 3}, 6)},
        what + " [1,1,70,3]");
  }
  expect_gradcheck(
      sdpa(true, 0.7),
      {grad_input({1, 2, 4, 1}, 7), grad_input({1, 2, 4, 1}, 8), grad_input({1, 2, 4, 1}, 9)},
      "explicit scale, Dh 1");
  // Peaked softmax (large logits): the online max keeps exp in range.
  expect_gradcheck(sdpa(false, 4.0),
                   {grad_input({1, 1, 9, 4}, 10, 3.0), grad_input({1, 1, 9, 4}, 11, 3.0),
                    grad_input({1, 1, 9, 4}, 12)},
                   "peaked softmax");
}

TEST(Attention, MatchesNaiveF64Reference) {
  // 130 rows: two blocks, the last partial; forward and all gradients in f64.
  for (bool causal : {true, false}) {
    const Tensor q = randn({2, 2, 130, 5}, DType::f64, 21),
                 k = randn({2, 2, 130, 5}, DType::f64, 22),
                 v = randn({2, 2, 130, 5}, DType::f64, 23),
                 g = randn({2, 2, 130, 5}, DType::f64, 24);
    const Reference ref = naive(q, k, v, g, causal);
    const OpResult got = run_op(q, k, v, g, causal, DType::f64);
    const std::string what = causal ? "causal " : "non-causal ";
    expect_close(got.out, ref.out, 1e-13, 1e-12, what + "out");
    expect_close(got.dq, ref.dq, 1e-13, 1e-11, what + "dq");
    expect_close(got.dk, ref.dk, 1e-13, 1e-11, what + "dk");
    expect_close(got.dv, ref.dv, 1e-13, 1e-11, what + "dv");
  }
  // An explicit scale and huge logits (scores up to ~±1000): no overflow, same result.
  const Tensor q = randn({1, 2, 80, 8}, DType::f64, 25, 10),
               k = randn({1, 2, 80, 8}, DType::f64, 26), v = randn({1, 2, 80, 8}, DType::f64, 27),
               g = randn({1, 2, 80, 8}, DType::f64, 28);
  const Reference ref = naive(q, k, v, g, false, 30.0);
  const OpResult got = run_op(q, k, v, g, false, DType::f64, 30.0);
  expect_close(got.out, ref.out, 1e-12, 1e-12, "huge logits out");
  expect_close(got.dq, ref.dq, 1e-10, 1e-10, "huge logits dq");
}

TEST(Attention, F32MatchesF64Reference) {
  // f32 math: each output is a convex combination of v (|out| <= max|v|), accumulated over up to
  // 150 terms of exp/GEMM error ~1e-7 relative.
  const Shape s{1, 3, 300, 32};  // two query chunks of 256 rows
  const Tensor q = randn(s, DType::f32, 31), k = randn(s, DType::f32, 32),
               v = randn(s, DType::f32, 33), g = randn(s, DType::f32, 34);
  for (bool causal : {true, false}) {
    const Reference ref = naive(q, k, v, g, causal);
    const OpResult got = run_op(q, k, v, g, causal, DType::f32);
    expect_close(got.out, ref.out, 2e-6, 1e-5, "f32 out");
    expect_close(got.dq, ref.dq, 1e-5, 1e-4, "f32 dq");
    expect_close(got.dk, ref.dk, 1e-5, 1e-4, "f32 dk");
    expect_close(got.dv, ref.dv, 1e-5, 1e-4, "f32 dv");
  }
}

// Largest |x|, to state gradient tolerances relative to the tensor's scale.
double max_abs(const Tensor& x) {
  double m = 0;
  for (double e : x.to_doubles()) m = std::max(m, std::fabs(e));
  return m;
}

TEST(Attention, LowPrecisionMatchesF32KernelOnRoundedInputs) {
  const Shape s{2, 2, 100, 24};
  WidenedBf16Products widened;
  for (DType dt : {DType::bf16, DType::f16}) {
    const double ulp = dt == DType::bf16 ? 0x1p-8 : 0x1p-11;
    const Tensor q = randn(s, dt, 41), k = randn(s, dt, 42), v = randn(s, dt, 43),
                 g = randn(s, dt, 44);
    for (bool causal : {true, false}) {
      const std::string what = std::string(dtype_name(dt)) + (causal ? " causal " : " ");
      const OpResult low = run_op(q, k, v, g, causal, dt);
      const OpResult f32 = run_op(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32),
                                  g.to(DType::f32), causal, DType::f32);
      // The forward widens to exactly the f32 kernel's inputs and does the same f32 math, so it
      // is that result rounded once.
      EXPECT_TRUE(same_bits(low.out, f32.out.to(dt))) << what << "out";
      // Backward differs only through D = rowsum(dO ∘ O) using the rounded O (the saved
      // output) and the final rounding: within 2 ulp of the gradient's scale.
      for (auto [got, ref, name] :
           {std::tuple{low.dq, f32.dq, "dq"}, std::tuple{low.dk, f32.dk, "dk"},
            std::tuple{low.dv, f32.dv, "dv"}}) {
        EXPECT_EQ(got.dtype(), dt);
        expect_close(got, ref, 2 * ulp * max_abs(ref), ulp, what + name);
      }
      // And against the exact math on the rounded inputs: out within 1 ulp plus f32 error.
      const Reference ref =
          naive(rounded(q, dt), rounded(k, dt), rounded(v, dt), rounded(g, dt), causal);
      expect_close(low.out, ref.out, ulp * max_abs(ref.out) * 0.05, ulp, what + "out vs f64");
    }
  }
}

TEST(Attention, NativeBf16ProductsStayWithinTheRoundingOfP) {
  if (!cpu::bf16_gemm_is_native()) GTEST_SKIP() << "no bf16 dot products on this CPU";
  // The products read bf16 as stored; P (and dS) are rounded to bf16 for them. Each rounded
  // p is within u = 2^-8 of itself, so out = Σ p·v / l moves by at most u·Σ p·|v| / l (the
  // same attention over |v|) before its own rounding (u·|out|).
  const Shape s{2, 2, 150, 32};  // T spans two query and key blocks
  const double u = 0x1p-8;
  const Tensor q = randn(s, DType::bf16, 71), k = randn(s, DType::bf16, 72),
               v = randn(s, DType::bf16, 73), g = randn(s, DType::bf16, 74);
  for (bool causal : {true, false}) {
    const std::string what = causal ? "causal " : "";
    const OpResult low = run_op(q, k, v, g, causal, DType::bf16);
    const OpResult f32 = run_op(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32),
                                g.to(DType::f32), causal, DType::f32);
    const Reference ref = naive(rounded(q, DType::bf16), rounded(k, DType::bf16),
                                rounded(v, DType::bf16), rounded(g, DType::bf16), causal);
    std::vector<double> v_abs = rounded(v, DType::bf16).to_doubles();
    for (double& x : v_abs) x = std::fabs(x);
    const Reference over_abs =
        naive(rounded(q, DType::bf16), rounded(k, DType::bf16),
              Tensor::from_doubles(v_abs, s, DType::f64), rounded(g, DType::bf16), causal);
    const std::vector<double> got = low.out.to_doubles(), want = ref.out.to_doubles(),
                              spread = over_abs.out.to_doubles();
    double worst = -1;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(
          worst, std::fabs(got[i] - want[i]) - (u * spread[i] + u * std::fabs(want[i]) + 1e-6));
    EXPECT_LE(worst, 0.0) << what << "out: beyond the rounding of P and of out";
    // It is the native path, forward and backward: not the widened path's bits.
    const OpResult wide = [&] {
      const testing::WidenedBf16Products widened;
      return run_op(q, k, v, g, causal, DType::bf16);
    }();
    EXPECT_TRUE(same_bits(wide.out, f32.out.to(DType::bf16))) << what << "widened out";
    for (auto [native, widened, name] :
         {std::tuple{low.out, wide.out, "out"}, std::tuple{low.dq, wide.dq, "dq"},
          std::tuple{low.dk, wide.dk, "dk"}, std::tuple{low.dv, wide.dv, "dv"}})
      EXPECT_FALSE(same_bits(native, widened)) << what << name << " took the widened path";
    // Gradients: within 2 ulp of their scale of the f32 kernel, as the widened path.
    for (auto [grad, f32_grad, name] :
         {std::tuple{low.dq, f32.dq, "dq"}, std::tuple{low.dk, f32.dk, "dk"},
          std::tuple{low.dv, f32.dv, "dv"}})
      expect_close(grad, f32_grad, 2 * u * max_abs(f32_grad), u, what + name);
  }
}

TEST(Attention, F32GradientIntoLowPrecisionOp) {
  // An f32 upstream gradient is used as is (not rounded to bf16 first).
  const Shape s{1, 2, 40, 8};
  const Tensor q = randn(s, DType::bf16, 51), k = randn(s, DType::bf16, 52),
               v = randn(s, DType::bf16, 53), g = randn(s, DType::f32, 54);
  const OpResult low = run_op(q, k, v, g, true, DType::bf16);
  EXPECT_EQ(low.dq.dtype(), DType::bf16);
  const Reference ref = naive(rounded(q, DType::bf16), rounded(k, DType::bf16),
                              rounded(v, DType::bf16), g.to(DType::f64), true);
  expect_close(low.dv, ref.dv, 0x1p-7 * max_abs(ref.dv), 0x1p-8, "dv from f32 grad");
  expect_close(low.dq, ref.dq, 0x1p-6 * max_abs(ref.dq), 0x1p-8, "dq from f32 grad");
}

TEST(Attention, StridedInputsAndPartialGradients) {
  // Head-major views of a [B, T, 3, H, Dh] buffer, as a GPT block makes them; only v needs grad.
  const Tensor qkv = randn({2, 9, 3, 2, 4}, DType::f64, 61);
  auto view = [&](int64_t i) { return qkv.select(2, i).permute({0, 2, 1, 3}); };
  Tensor v = view(2).contiguous().set_requires_grad(true, DType::f64);
  const Tensor g = randn({2, 2, 9, 4}, DType::f64, 62);
  scaled_dot_product_attention(view(0), view(1), v, true).backward(g);
  const Reference ref = naive(view(0).contiguous(), view(1).contiguous(), v.detach(), g, true);
  expect_close(v.grad(), ref.dv, 1e-13, 1e-12, "dv");
}

// A model's q, k, v are [B, T, H·Dh] projections seen as [B, H, T, Dh]: the kernels read them
// in place, write the output in the same [B, T, H, Dh] memory (so out.transpose(1, 2) is
// contiguous) and hand back gradients laid out as q, k, v, which flow into the projections'
// gradients without copies. Bits must equal those of contiguous copies of the same inputs.
TEST(Attention, ProjectionLayoutsGiveTheBitsOfContiguousInputs) {
  const int64_t B = 2, T = 150, H = 3, D = 16;  // T spans two query and key blocks
  for (DType dt : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
    for (bool causal : {true, false}) {
      const std::string what = std::string(dtype_name(dt)) + (causal ? " causal" : "");
      const DType gd = dt == DType::f64 ? DType::f64 : DType::f32;
      Tensor xq = randn({B, T, H * D}, dt, 81).set_requires_grad(true, gd);
      Tensor xk = randn({B, T, H * D}, dt, 82).set_requires_grad(true, gd);
      Tensor xv = randn({B, T, H * D}, dt, 83).set_requires_grad(true, gd);
      auto heads = [&](const Tensor& x) { return x.view({B, T, H, D}).permute({0, 2, 1, 3}); };
      const Tensor gout_bthd = randn({B, T, H, D}, dt, 84);
      Tensor out = scaled_dot_product_attention(heads(xq), heads(xk), heads(xv), causal);
      EXPECT_TRUE(out.transpose(1, 2).is_contiguous()) << what;
      out.backward(gout_bthd.transpose(1, 2));  // the layout a following projection gives

      const OpResult ref =
          run_op(heads(xq).contiguous(), heads(xk).contiguous(), heads(xv).contiguous(),
                 gout_bthd.transpose(1, 2).contiguous(), causal, gd);
      auto as_proj = [&](const Tensor& g) { return g.transpose(1, 2).reshape({B, T, H * D}); };
      EXPECT_TRUE(same_bits(out.detach(), ref.out)) << what << " out";
      EXPECT_TRUE(same_bits(xq.grad(), as_proj(ref.dq))) << what << " dq";
      EXPECT_TRUE(same_bits(xk.grad(), as_proj(ref.dk))) << what << " dk";
      EXPECT_TRUE(same_bits(xv.grad(), as_proj(ref.dv))) << what << " dv";
    }
  }
}

// Layouts the kernels cannot read as matrices are copied first: one query row whose stride
// is smaller than Dh (a transposed [B, H, Dh, 1]), keys broadcast along T (stride 0).
TEST(Attention, RowsCloserThanDhAreCopiedFirst) {
  const int64_t B = 1, H = 2, D = 8, T = 5;
  auto broadcast_rows = [&](const Tensor& one_row) {  // [B, H, 1, D] -> [B, H, T, D], stride 0
    return one_row.as_strided({B, H, T, D}, {H * D, D, 0, 1}, 0);
  };
  for (DType dt : {DType::f32, DType::bf16}) {
    // One query row from a transposed [B, H, D, 1]: its row stride is 1.
    const Tensor q1 = randn({B, H, D, 1}, dt, 91).transpose(2, 3);
    const Tensor k1 = randn({B, H, 1, D}, dt, 92), v1 = randn({B, H, 1, D}, dt, 93);
    EXPECT_TRUE(same_bits(scaled_dot_product_attention(q1, k1, v1, true),
                          scaled_dot_product_attention(q1.contiguous(), k1, v1, true)))
        << dtype_name(dt);
    // Keys, then queries, broadcast along T.
    const Tensor q = randn({B, H, T, D}, dt, 94), v = randn({B, H, T, D}, dt, 95);
    const Tensor k = broadcast_rows(randn({B, H, 1, D}, dt, 96));
    EXPECT_TRUE(same_bits(scaled_dot_product_attention(q, k, v, false),
                          scaled_dot_product_attention(q, k.contiguous(), v, false)))
        << dtype_name(dt);
    const Tensor q2 = broadcast_rows(randn({B, H, 1, D}, dt, 97));
    EXPECT_TRUE(same_bits(scaled_dot_product_attention(q2, q, v, true),
                          scaled_dot_product_attention(q2.contiguous(), q, v, true)))
        << dtype_name(dt);
  }
}

TEST(Attention, SameBitsWithOneAndTwoThreads) {
  const Shape s{2, 3, 200, 64};
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor q = randn(s, dt, 71), k = randn(s, dt, 72), v = randn(s, dt, 73),
                 g = randn(s, dt, 74);
    for (bool causal : {true, false}) {
      const OpResult one = with_threads(1, [&] { return run_op(q, k, v, g, causal, dt); });
      const OpResult two = with_threads(2, [&] { return run_op(q, k, v, g, causal, dt); });
      const std::string what = std::string(dtype_name(dt)) + (causal ? " causal" : "");
      EXPECT_TRUE(same_bits(one.out, two.out)) << what << " out";
      EXPECT_TRUE(same_bits(one.dq, two.dq)) << what << " dq";
      EXPECT_TRUE(same_bits(one.dk, two.dk)) << what << " dk";
      EXPECT_TRUE(same_bits(one.dv, two.dv)) << what << " dv";
    }
  }
}

// Worst relative error of exp(x) (0 required below the f32 normal range) and the sum's error.
void check_exp(const std::vector<float>& x, const std::vector<float>& y, float sum,
               const std::string& what) {
  double worst = 0, ref_sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(static_cast<double>(x[i]));
    ref_sum += ref;
    if (x[i] < -87.3366f) {
      EXPECT_EQ(y[i], 0.0f) << what << " " << x[i];  // f32 subnormal range: flushed
      continue;
    }
    worst = std::max(worst, std::fabs(y[i] - ref) / ref);
  }
  EXPECT_LT(worst, 2.5e-7) << what;
  EXPECT_NEAR(sum, ref_sum, 1e-6 * ref_sum) << what;
}

TEST(Attention, ExpHelperAccuracy) {
  // The row exp against libm in f64 over the range attention's shifted scores use; the length
  // is not a multiple of the 16 lanes, so the padded tail is covered too. (Every instruction
  // set of the shared row kernels is checked in softmax_test.cpp.)
  std::vector<float> x;
  for (double e = -80.0; e <= 0.0; e += 1.0 / 512) x.push_back(static_cast<float>(e));
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> y = x;
  check_exp(x, y, cpu::exp_scaled_sum(y.data(), 1.0f, 0.0f, n), "row exp");
  // Scale and shift: exp(x * 0.5 - 1); a NaN stays NaN.
  float v[4] = {2.0f, 0.0f, -4.0f, std::numeric_limits<float>::quiet_NaN()};
  cpu::exp_scaled_sum(v, 0.5f, 1.0f, 3);
  EXPECT_NEAR(v[0], 1.0, 2e-7);
  EXPECT_NEAR(v[2], std::exp(-3.0), 2e-7 * std::exp(-3.0));
  cpu::exp_scaled_sum(v + 3, 1.0f, 0.0f, 1);
  EXPECT_TRUE(std::isnan(v[3]));
  const float row[5] = {-3.0f, 7.0f, 2.0f, 7.5f, -9.0f};
  EXPECT_EQ(cpu::row_max(row, 5), 7.5f);
  EXPECT_EQ(cpu::row_max(row, 3), 7.0f);
  std::vector<float> long_row(37, -1.0f);
  long_row[33] = 4.0f;  // in the tail after two full lane groups
  EXPECT_EQ(cpu::row_max(long_row.data(), 37), 4.0f);
}

TEST(Attention, EmptySequenceOrHeadDim) {
  for (const Shape& s : {Shape{2, 3, 0, 4}, Shape{1, 2, 3, 0}}) {
    Tensor q = Tensor::zeros(s, DType::f32).set_requires_grad();
    const Tensor out = scaled_dot_product_attention(q, q, q);
    EXPECT_EQ(out.shape(), s);
    out.backward(Tensor::zeros(s, DType::f32));
    EXPECT_EQ(q.grad().shape(), s);
  }
}

TEST(Attention, BadInput) {
  const Tensor q = randn({1, 2, 5, 4}, DType::f32, 81);
  EXPECT_THROW(scaled_dot_product_attention(q, randn({1, 2, 6, 4}, DType::f32, 82), q), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, q, randn({1, 2, 5, 3}, DType::f32, 83)), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, q.to(DType::bf16), q), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, q, q.to(DType::f64)), Error);
  const Tensor q3 = randn({2, 5, 4}, DType::f32, 84);
  EXPECT_THROW(scaled_dot_product_attention(q3, q3, q3), Error);
  const Tensor qi = Tensor::zeros({1, 1, 2, 2}, DType::i32);
  EXPECT_THROW(scaled_dot_product_attention(qi, qi, qi), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, q, q, true, INFINITY), Error);
  EXPECT_THROW(scaled_dot_product_attention(Tensor(), q, q), Error);
}

}  // namespace
}  // namespace mixprec
