// The AMX-BF16 block product (cpu/gemm_amx.h) against a naive f64 triple loop on every layout,
// ragged sizes (partial tiles in m, n and k), alpha/beta and padded leading dimensions; exact
// agreement with the portable path (widen + sgemm) when every sum is exact; and cpu::gemm
// through both paths. Skipped on CPUs without AMX.
#include "cpu/gemm_amx.h"

#include <gtest/gtest.h>

#include "cpu/gemm_avx512_bf16.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {
namespace {

// AMX on, or the portable path (widened f32, no AVX512-BF16 products either); restores both
// switches on scope exit.
class AmxSwitch {
 public:
  explicit AmxSwitch(bool on) {
    amx::set_enabled(on);
    avx512_bf16_gemm::set_enabled(false);
  }
  ~AmxSwitch() {
    amx::set_enabled(amx_);
    avx512_bf16_gemm::set_enabled(dot_);
  }

 private:
  bool amx_ = amx::enabled(), dot_ = avx512_bf16_gemm::enabled();
};

Tensor uniform_bf16(int64_t rows, int64_t cols, uint64_t seed, double lo = -1, double hi = 1) {
  Generator gen(seed);
  return Tensor::uniform({rows, cols}, lo, hi, gen, DType::bf16);
}

struct Layout {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  int64_t pad;
};

TEST(GemmAmx, MatchesNaiveF64OnEveryLayout) {
  if (!amx::available()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  const std::vector<Layout> layouts = {
      {1, 1, 1, false, false, 1.0f, 0.0f, 0},      {7, 5, 3, true, false, 1.0f, 0.0f, 1},
      {33, 17, 65, false, true, 0.5f, 1.0f, 3},    {64, 300, 40, true, true, -2.0f, 0.5f, 0},
      {100, 48, 513, false, false, 1.0f, 2.0f, 2}, {32, 32, 32, true, true, 1.0f, 0.0f, 0},
      {50, 70, 96, false, true, 1.0f, -1.0f, 5},
  };
  for (const Layout& c : layouts) {
    const int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;
    const int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
    const Tensor A = uniform_bf16(ar, ac + c.pad, 1), B = uniform_bf16(br, bc + c.pad, 2);
    const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.n + c.pad;
    Generator gen(3);
    Tensor C = Tensor::uniform({c.m, ldc}, -1, 1, gen, DType::f32);
    const std::vector<double> a = A.to_doubles(), b = B.to_doubles(), c0 = C.to_doubles();
    amx::gemm_bf16(c.m, c.n, c.k, c.alpha, static_cast<const uint16_t*>(A.raw_data()), lda, c.ta,
                   static_cast<const uint16_t*>(B.raw_data()), ldb, c.tb, c.beta, C.data<float>(),
                   ldc);
    const std::vector<double> got = C.to_doubles();
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double x = c.ta ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)];
          const double y = c.tb ? b[size_t(j * ldb + p)] : b[size_t(p * ldb + j)];
          ref += x * y;
          mag += std::fabs(x * y);
        }
        const double old = c0[size_t(i * ldc + j)];
        ref = c.alpha * ref + (c.beta == 0 ? 0.0 : c.beta * old);
        mag = std::fabs(c.alpha) * mag + std::fabs(c.beta * old);
        ASSERT_NEAR(got[size_t(i * ldc + j)], ref, 0x1p-22 * mag * 2 + 1e-30)
            << "i=" << i << " j=" << j << " m=" << c.m << " n=" << c.n << " k=" << c.k
            << " ta=" << c.ta << " tb=" << c.tb;
      }
      for (int64_t j = c.n; j < ldc; ++j)  // padding is never written
        ASSERT_EQ(got[size_t(i * ldc + j)], c0[size_t(i * ldc + j)]);
    }
  }
}

TEST(GemmAmx, ExactSumsGiveThePortablePathsBits) {
  if (!amx::available()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  // Small integers: every product and partial sum is exact in f32, so both paths must agree
  // bit for bit with the integer result, whatever their summation order.
  const int64_t m = 70, n = 45, k = 130;
  std::vector<double> av(size_t(m * k)), bv(size_t(n * k));
  for (size_t i = 0; i < av.size(); ++i) av[i] = double(int64_t(i * 7 % 9) - 4);
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = double(int64_t(i * 5 % 7) - 3);
  const Tensor A = Tensor::from_doubles(av, {m, k}, DType::bf16);
  const Tensor B = Tensor::from_doubles(bv, {n, k}, DType::bf16);
  std::vector<Tensor> out;
  for (bool on : {true, false}) {
    AmxSwitch sw(on);
    Tensor C = Tensor::empty({m, n}, DType::f32);
    gemm(m, n, k, 1.0f, {DType::bf16, A.raw_data(), k}, {DType::bf16, B.raw_data(), k, true}, 0.0f,
         {DType::f32, C.raw_data(), n});
    out.push_back(C);
  }
  ASSERT_EQ(std::memcmp(out[0].raw_data(), out[1].raw_data(), out[0].nbytes()), 0);
  const std::vector<double> got = out[0].to_doubles();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t p = 0; p < k; ++p) ref += av[size_t(i * k + p)] * bv[size_t(j * k + p)];
      ASSERT_EQ(got[size_t(i * n + j)], ref) << i << "," << j;
    }
}

TEST(GemmAmx, GemmThroughBothPathsAgreesOnTransformerShapes) {
  if (!amx::available()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  // A linear layer's three products (forward, dX, dW with its K split) in bf16 with f32 and
  // bf16 outputs: the paths differ only in summation order.
  const int64_t rows = 512, in = 256, out = 384;
  const Tensor X = uniform_bf16(rows, in, 5), W = uniform_bf16(out, in, 6);
  const Tensor G = uniform_bf16(rows, out, 7);
  struct Product {
    int64_t m, n, k;
    GemmOperand a, b;
  };
  const std::vector<Product> products = {
      {rows, out, in, {DType::bf16, X.raw_data(), in}, {DType::bf16, W.raw_data(), in, true}},
      {rows, in, out, {DType::bf16, G.raw_data(), out}, {DType::bf16, W.raw_data(), in}},
      {out, in, rows, {DType::bf16, G.raw_data(), out, true}, {DType::bf16, X.raw_data(), in}},
  };
  for (const Product& p : products)
    for (DType cd : {DType::f32, DType::bf16}) {
      std::vector<std::vector<double>> results;
      for (bool on : {true, false}) {
        AmxSwitch sw(on);
        Tensor C = Tensor::empty({p.m, p.n}, cd);
        gemm(p.m, p.n, p.k, 1.0f, p.a, p.b, 0.0f, {cd, C.raw_data(), p.n});
        results.push_back(C.to_doubles());
      }
      double worst = 0;
      for (size_t i = 0; i < results[0].size(); ++i)
        worst = std::max(worst, std::fabs(results[0][i] - results[1][i]));
      // |sum| <= k; f32 order differences ~ k * 2^-24 * k, a bf16 rounding flip 2^-8 * |c|.
      const double bound = cd == DType::f32 ? 1e-4 * double(p.k) : 0x1p-7 * double(p.k);
      EXPECT_LT(worst, bound) << p.m << "x" << p.n << "x" << p.k << " " << dtype_name(cd);
    }
}

TEST(GemmAmx, SameBitsWithOneAndTwoThreads) {
  if (!amx::available()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{600, 300, 700}, {48, 40, 4000}}) {
    const Tensor A = uniform_bf16(m, k, 11), B = uniform_bf16(n, k, 12);
    std::vector<Tensor> out;
    for (int threads : {1, 2}) {
      const int saved = num_threads();
      set_num_threads(threads);
      Tensor C = Tensor::empty({m, n}, DType::f32);
      gemm(m, n, k, 1.0f, {DType::bf16, A.raw_data(), k}, {DType::bf16, B.raw_data(), k, true},
           0.0f, {DType::f32, C.raw_data(), n});
      set_num_threads(saved);
      out.push_back(C);
    }
    EXPECT_EQ(std::memcmp(out[0].raw_data(), out[1].raw_data(), out[0].nbytes()), 0);
  }
}

}  // namespace
}  // namespace mixprec::cpu
