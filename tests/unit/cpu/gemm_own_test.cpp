// mixprec's own GEMM block product (cpu/gemm_own.h), each build this CPU runs (AVX2, AVX-512):
// bit for bit against a scalar loop of its summation order (K in 384-blocks, each summed from
// zero by fused multiply-adds, then added into C; bias and rounding of the epilogue), so the
// builds give the same bits; against a naive f64 triple loop on every layout and operand
// dtype, with sizes that cut every block (both builds' micro-tiles, KC = 384, MC = 96,
// NC = 1024) short; exact agreement with the OpenBLAS path when every sum is exact; and
// cpu::gemm through both paths. Skipped on CPUs with neither build.
#include "cpu/gemm_own.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mixprec/cpu/gemm.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/tensor/tensor.h"
#include "support/bf16_products.h"
#include "support/own_gemm_path.h"

namespace mixprec::cpu {
namespace {

using own_gemm::Build;

// Runs one build for a scope, then the widest again.
struct BuildSwitch {
  explicit BuildSwitch(Build b) { own_gemm::set_build(b); }
  ~BuildSwitch() { own_gemm::set_build(own_gemm::best_build()); }
};

// The builds this CPU runs, narrowest first.
std::vector<Build> builds() {
  std::vector<Build> out;
  for (Build b : {Build::avx2, Build::avx512})
    if (b <= own_gemm::best_build()) out.push_back(b);
  return out;
}

struct Layout {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  int64_t pad;
  DType da, db;
};

// Sizes that cut every block short: 6 x 16 and 12 x 32 micro-tiles, KC = 384, MC = 96,
// NC = 1024.
const std::vector<Layout>& layouts() {
  const DType f32 = DType::f32, bf16 = DType::bf16, f16 = DType::f16;
  static const std::vector<Layout> all = {
      {1, 1, 1, false, false, 1.0f, 0.0f, 0, f32, f32},
      {13, 33, 17, false, false, 1.0f, 0.0f, 1, f32, f32},
      {13, 33, 17, true, true, 0.5f, 1.0f, 0, f16, f16},
      {97, 31, 385, false, true, 1.0f, -0.7f, 3, bf16, bf16},  // beta·c rounds
      {200, 70, 800, true, false, -2.0f, 0.5f, 2, f16, f32},
      {25, 1030, 40, false, true, 1.0f, 2.0f, 0, f32, bf16},  // two NC blocks
      {12, 32, 384, false, false, 1.0f, 0.0f, 0, bf16, f16},  // whole 12 x 32 tile, one KC
      {6, 16, 384, true, false, 1.0f, 0.0f, 0, f32, bf16},    // whole 6 x 16 tile
      {100, 65, 769, true, true, 0.3f, 1.0f, 1, f32, f16},    // alpha·s rounds
      {7, 9, 3, true, true, 1.7f, 0.0f, 0, bf16, f32},        // narrower than one vector
  };
  return all;
}

struct Operands {
  Tensor a, b, c;
  int64_t lda, ldb, ldc;
};

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

// Uniform operands in [-1, 1], or small integers (`ints`: sums such as 257 sit exactly halfway
// between two bf16 values, so rounding ties are tested).
Operands operands(const Layout& c, bool ints = false) {
  const int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;
  const int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
  Operands o{Tensor(), Tensor(), Tensor(), ac + c.pad, bc + c.pad, c.n + c.pad};
  Generator gen(7);
  o.a = ints ? small_ints({ar, o.lda}, -3, 3, 1, c.da)
             : Tensor::uniform({ar, o.lda}, -1, 1, gen, c.da);
  o.b = ints ? small_ints({br, o.ldb}, -3, 3, 2, c.db)
             : Tensor::uniform({br, o.ldb}, -1, 1, gen, c.db);
  o.c = Tensor::uniform({c.m, o.ldc}, -1, 1, gen, DType::f32);
  return o;
}

TEST(GemmOwn, MatchesNaiveF64OnEveryLayoutAndDtype) {
  if (builds().empty()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
  for (Build build : builds()) {
    BuildSwitch use(build);
    for (const Layout& c : layouts()) {
      Operands o = operands(c);
      const std::vector<double> a = o.a.to_doubles(), b = o.b.to_doubles(), c0 = o.c.to_doubles();
      own_gemm::gemm(c.m, c.n, c.k, c.alpha, {c.da, o.a.raw_data(), o.lda, c.ta},
                     {c.db, o.b.raw_data(), o.ldb, c.tb}, c.beta, o.c.data<float>(), o.ldc);
      const std::vector<double> got = o.c.to_doubles();
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double ref = 0, mag = 0;
          for (int64_t p = 0; p < c.k; ++p) {
            const double x = c.ta ? a[p * o.lda + i] : a[i * o.lda + p];
            const double y = c.tb ? b[j * o.ldb + p] : b[p * o.ldb + j];
            ref += x * y;
            mag += std::fabs(x * y);
          }
          const double old = c0[i * o.ldc + j];
          ref = c.alpha * ref + c.beta * old;
          mag = std::fabs(c.alpha) * mag + std::fabs(c.beta * old);
          // f32 sums of exact products: k roundings at most, each 2^-24 of the running size.
          ASSERT_NEAR(got[i * o.ldc + j], ref, 0x1p-22 * mag + 1e-30)
              << own_gemm::build_name(build) << " i=" << i << " j=" << j << " m=" << c.m
              << " n=" << c.n << " k=" << c.k << " ta=" << c.ta << " tb=" << c.tb << " "
              << dtype_name(c.da) << "x" << dtype_name(c.db);
        }
        // Padding columns are never written.
        for (int64_t j = c.n; j < o.ldc; ++j) ASSERT_EQ(got[i * o.ldc + j], c0[i * o.ldc + j]);
      }
    }
  }
}

// Element (i, j) as the kernel sums it: K in blocks of 384, each summed from zero by fused
// multiply-adds in order, then alpha·s added into C (beta·c on the first block, or the bias
// in its place; C itself on the others), one rounding each.
float ordered_element(const Layout& c, const std::vector<float>& a, const std::vector<float>& b,
                      const Operands& o, int64_t i, int64_t j, float c0, const float* bias) {
  constexpr int64_t kKC = 384;
  float acc = c0;
  for (int64_t k0 = 0; k0 < c.k; k0 += kKC) {
    float s = 0.0f;
    for (int64_t p = k0; p < std::min(c.k, k0 + kKC); ++p)
      s = std::fma(c.ta ? a[p * o.lda + i] : a[i * o.lda + p],
                   c.tb ? b[j * o.ldb + p] : b[p * o.ldb + j], s);
    const float r = c.alpha * s;
    if (k0 > 0)
      acc = std::fma(1.0f, acc, r);
    else if (bias != nullptr)
      acc = bias[j] + r;
    else
      acc = c.beta != 0.0f ? std::fma(c.beta, acc, r) : r;
  }
  return acc;
}

std::vector<float> floats(const Tensor& t) {
  std::vector<float> out;
  for (double v : t.to_doubles()) out.push_back(static_cast<float>(v));
  return out;
}

TEST(GemmOwn, GivesTheBitsOfItsSummationOrderOnEachBuild) {
  if (builds().empty()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
  // Where the sums go: an f32 C (alpha, beta), an f32 C from the bias, or the epilogue's bias
  // and rounding to a bf16 / f16 C.
  struct Out {
    DType dtype;
    bool bias;
  };
  for (Out out : {Out{DType::f32, false}, Out{DType::f32, true}, Out{DType::bf16, true},
                  Out{DType::f16, false}})
    for (bool ints : {false, true})
      for (Build build : builds()) {
        BuildSwitch use(build);
        for (const Layout& c : layouts()) {
          Operands o = operands(c, ints);
          const std::vector<float> a = floats(o.a), b = floats(o.b), c0 = floats(o.c);
          Generator gen(9);
          const std::vector<float> bias = floats(Tensor::uniform({c.n}, -1, 1, gen, DType::f32));
          const bool narrow_out = out.dtype != DType::f32;
          std::vector<uint16_t> narrow(static_cast<size_t>(c.m * o.ldc), 0xABCD);
          const GemmEpilogue ep{out.bias ? bias.data() : nullptr,
                                narrow_out ? narrow.data() : nullptr, out.dtype == DType::f16,
                                o.ldc};
          const float beta = narrow_out || out.bias ? 0.0f : c.beta;
          own_gemm::gemm(c.m, c.n, c.k, c.alpha, {c.da, o.a.raw_data(), o.lda, c.ta},
                         {c.db, o.b.raw_data(), o.ldb, c.tb}, beta, o.c.data<float>(), o.ldc, &ep);
          const float* got = o.c.data<float>();
          for (int64_t i = 0; i < c.m; ++i)
            for (int64_t j = 0; j < o.ldc; ++j) {
              const size_t e = static_cast<size_t>(i * o.ldc + j);
              const std::string where = std::string(own_gemm::build_name(build)) + " -> " +
                                        dtype_name(out.dtype) + (out.bias ? " + bias" : "") +
                                        (ints ? " integers" : "") + " i=" + std::to_string(i) +
                                        " j=" + std::to_string(j) + " m=" + std::to_string(c.m) +
                                        " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k);
              if (j >= c.n) {  // padding is never written
                if (narrow_out)
                  ASSERT_EQ(narrow[e], 0xABCD) << where;
                else
                  ASSERT_EQ(std::memcmp(&got[e], &c0[e], 4), 0) << where;
                continue;
              }
              Layout l = c;
              l.beta = beta;
              const float sum =
                  ordered_element(l, a, b, o, i, j, c0[e], out.bias ? bias.data() : nullptr);
              if (!narrow_out) {
                ASSERT_EQ(std::memcmp(&got[e], &sum, 4), 0)
                    << where << ": " << got[e] << " != " << sum;
                continue;
              }
              uint16_t want = 0;
              convert_from_f32(&sum, out.dtype, &want, 1, {}, Isa::scalar);
              ASSERT_EQ(narrow[e], want) << where;
            }
        }
      }
}

// Small integers: every product and partial sum is exact in f32, so any order of the sums
// gives the same bits, and the two paths of cpu::gemm must agree exactly.
TEST(GemmOwn, AgreesExactlyWithTheOpenBlasPathWhenSumsAreExact) {
  if (builds().empty()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
  // bf16 x bf16 through this kernel (widened), not the native bf16 products.
  const testing::WidenedBf16Products widened;
  for (Build build : builds()) {
    BuildSwitch use(build);
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const int64_t m = 150, n = 1100, k = 500;
          const Tensor A = small_ints(ta ? Shape{k, m} : Shape{m, k}, -3, 3, 1, dt);
          const Tensor B = small_ints(tb ? Shape{n, k} : Shape{k, n}, -3, 3, 2, dt);
          const Tensor bias = small_ints({n}, -8, 8, 3, DType::f32);
          std::vector<Tensor> out;
          for (bool own : {true, false}) {
            const testing::OwnGemmPath path(own);
            Tensor C = Tensor::full({m, n}, 2.0, DType::f32);
            gemm(m, n, k, 1.0f, {dt, A.raw_data(), ta ? m : k, ta},
                 {dt, B.raw_data(), tb ? k : n, tb}, 1.0f,
                 {DType::f32, C.raw_data(), n, 0, bias.raw_data()});
            out.push_back(C);
          }
          EXPECT_EQ(std::memcmp(out[0].raw_data(), out[1].raw_data(), out[0].nbytes()), 0)
              << own_gemm::build_name(build) << " " << dtype_name(dt) << " ta=" << ta
              << " tb=" << tb;
        }
  }
}

TEST(GemmOwn, RefusesABuildTheCpuLacks) {
  if (own_gemm::best_build() == Build::avx512) GTEST_SKIP() << "this CPU runs every build";
  EXPECT_THROW(own_gemm::set_build(Build::avx512), Error);
  EXPECT_EQ(own_gemm::build(), own_gemm::best_build());
}

}  // namespace
}  // namespace mixprec::cpu
