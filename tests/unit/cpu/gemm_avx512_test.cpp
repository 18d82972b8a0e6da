// The AVX-512 block product (cpu/gemm_avx512.h) against a naive f64 triple loop on every
// layout and operand dtype (bf16 x bf16 widened, not on the native bf16 products), with sizes that
// cut every block (the 12 x 32 micro-tile, KC = 384, MC = 96, NC = 1024) short; exact agreement
// with the OpenBLAS path when every sum is exact; and cpu::gemm through both paths. Skipped on CPUs
// without AVX-512.
#include "cpu/gemm_avx512.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mixprec/cpu/gemm.h"
#include "mixprec/tensor/tensor.h"
#include "support/bf16_products.h"

namespace mixprec::cpu {
namespace {

// Restores the switch on scope exit.
struct OwnGemmSwitch {
  explicit OwnGemmSwitch(bool on) { avx512_gemm::set_enabled(on); }
  ~OwnGemmSwitch() { avx512_gemm::set_enabled(true); }
};

struct Layout {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  int64_t pad;
  DType da, db;
};

TEST(GemmAvx512, MatchesNaiveF64OnEveryLayoutAndDtype) {
  if (!avx512_gemm::available()) GTEST_SKIP() << "no AVX-512 on this CPU";
  const DType f32 = DType::f32, bf16 = DType::bf16, f16 = DType::f16;
  const std::vector<Layout> layouts = {
      {1, 1, 1, false, false, 1.0f, 0.0f, 0, f32, f32},
      {13, 33, 17, false, false, 1.0f, 0.0f, 1, f32, f32},
      {13, 33, 17, true, true, 0.5f, 1.0f, 0, f16, f16},
      {97, 31, 385, false, true, 1.0f, -1.0f, 3, bf16, bf16},
      {200, 70, 800, true, false, -2.0f, 0.5f, 2, f16, f32},
      {25, 1030, 40, false, true, 1.0f, 2.0f, 0, f32, bf16},  // two NC blocks
      {12, 32, 384, false, false, 1.0f, 0.0f, 0, bf16, f16},  // whole micro-tile, one KC
      {100, 65, 769, true, true, 1.0f, 1.0f, 1, f32, f16},
  };
  for (const Layout& c : layouts) {
    const int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;
    const int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
    const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.n + c.pad;
    Generator gen(7);
    const Tensor A = Tensor::uniform({ar, lda}, -1, 1, gen, c.da);
    const Tensor B = Tensor::uniform({br, ldb}, -1, 1, gen, c.db);
    Tensor C = Tensor::uniform({c.m, ldc}, -1, 1, gen, DType::f32);
    const std::vector<double> a = A.to_doubles(), b = B.to_doubles(), c0 = C.to_doubles();
    avx512_gemm::gemm(c.m, c.n, c.k, c.alpha, {c.da, A.raw_data(), lda, c.ta},
                      {c.db, B.raw_data(), ldb, c.tb}, c.beta, C.data<float>(), ldc);
    const std::vector<double> got = C.to_doubles();
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double x = c.ta ? a[p * lda + i] : a[i * lda + p];
          const double y = c.tb ? b[j * ldb + p] : b[p * ldb + j];
          ref += x * y;
          mag += std::fabs(x * y);
        }
        const double old = c0[i * ldc + j];
        ref = c.alpha * ref + c.beta * old;
        mag = std::fabs(c.alpha) * mag + std::fabs(c.beta * old);
        // f32 sums of exact products: k roundings at most, each 2^-24 of the running size.
        ASSERT_NEAR(got[i * ldc + j], ref, 0x1p-22 * mag + 1e-30)
            << "i=" << i << " j=" << j << " m=" << c.m << " n=" << c.n << " k=" << c.k
            << " ta=" << c.ta << " tb=" << c.tb << " " << dtype_name(c.da) << "x"
            << dtype_name(c.db);
      }
      // Padding columns are never written.
      for (int64_t j = c.n; j < ldc; ++j) ASSERT_EQ(got[i * ldc + j], c0[i * ldc + j]);
    }
  }
}

// Integers in [lo, hi] from a fixed-seed LCG, stored as dt.
Tensor small_ints(const Shape& shape, int lo, int hi, uint64_t seed, DType dt) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + static_cast<int>((seed >> 33) % static_cast<uint64_t>(hi - lo + 1));
  }
  return Tensor::from_doubles(v, shape, dt);
}

// Small integers: every product and partial sum is exact in f32, so any order of the sums
// gives the same bits, and the two paths of cpu::gemm must agree exactly.
TEST(GemmAvx512, AgreesExactlyWithTheOpenBlasPathWhenSumsAreExact) {
  if (!avx512_gemm::available()) GTEST_SKIP() << "no AVX-512 on this CPU";
  // bf16 x bf16 through this kernel (widened), not the native bf16 products.
  const testing::WidenedBf16Products widened;
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const int64_t m = 150, n = 1100, k = 500;
        const Tensor A = small_ints(ta ? Shape{k, m} : Shape{m, k}, -3, 3, 1, dt);
        const Tensor B = small_ints(tb ? Shape{n, k} : Shape{k, n}, -3, 3, 2, dt);
        const Tensor bias = small_ints({n}, -8, 8, 3, DType::f32);
        std::vector<Tensor> out;
        for (bool own : {true, false}) {
          OwnGemmSwitch sw(own);
          Tensor C = Tensor::full({m, n}, 2.0, DType::f32);
          gemm(m, n, k, 1.0f, {dt, A.raw_data(), ta ? m : k, ta},
               {dt, B.raw_data(), tb ? k : n, tb}, 1.0f,
               {DType::f32, C.raw_data(), n, 0, bias.raw_data()});
          out.push_back(C);
        }
        EXPECT_EQ(std::memcmp(out[0].raw_data(), out[1].raw_data(), out[0].nbytes()), 0)
            << dtype_name(dt) << " ta=" << ta << " tb=" << tb;
      }
}

}  // namespace
}  // namespace mixprec::cpu
