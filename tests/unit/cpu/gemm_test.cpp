// GEMM against a naive f64 triple loop on the same (rounded) inputs, for every dtype mix,
// transpose, batch, alpha/beta and ld; and thread-count independence of the bits.
#include "mixprec/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {
namespace {

struct Case {
  int64_t m, n, k, batch;
  bool ta, tb;
  float alpha, beta;
  int64_t pad;  // extra elements per stored row
  bool bias = false;
};

// Stored matrix of rows x cols (+pad) per batch entry, values exactly representable in dtype.
Tensor random_matrix(int64_t batch, int64_t rows, int64_t cols, int64_t pad, DType dtype,
                     uint64_t seed) {
  Generator gen(seed);
  return Tensor::uniform({batch, rows, cols + pad}, -1.0, 1.0, gen, dtype);
}

double at(const std::vector<double>& v, int64_t b, int64_t r, int64_t c, int64_t rows, int64_t ld) {
  return v[static_cast<size_t>(b * rows * ld + r * ld + c)];
}

void run_case(const Case& c, DType ab, DType cd) {
  const int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;
  const int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
  Tensor A = random_matrix(c.batch, ar, ac, c.pad, ab, 1);
  Tensor B = random_matrix(c.batch, br, bc, c.pad, ab, 2);
  Tensor C = random_matrix(c.batch, c.m, c.n, c.pad, cd, 3);
  const Tensor bias = random_matrix(1, 1, c.n, 0, cd, 4);
  const std::vector<double> bv = bias.to_doubles();
  const std::vector<double> a = A.to_doubles(), b = B.to_doubles(), c0 = C.to_doubles();
  const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.n + c.pad;
  gemm(c.m, c.n, c.k, c.alpha, {ab, A.raw_data(), lda, c.ta, ar * lda},
       {ab, B.raw_data(), ldb, c.tb, br * ldb}, c.beta,
       {cd, C.raw_data(), ldc, c.m * ldc, c.bias ? bias.raw_data() : nullptr}, c.batch);
  const std::vector<double> got = C.to_doubles();
  // f32 accumulation of k products of values in [-1, 1], then one rounding into C.
  const double unit = cd == DType::f64    ? 0x1p-52
                      : cd == DType::f32  ? 0x1p-23
                      : cd == DType::bf16 ? 0x1p-8
                                          : 0x1p-11;
  const double accum = ab == DType::f64 ? 0x1p-50 : 0x1p-22;
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double x = c.ta ? at(a, bi, p, i, ar, lda) : at(a, bi, i, p, ar, lda);
          const double y = c.tb ? at(b, bi, j, p, br, ldb) : at(b, bi, p, j, br, ldb);
          ref += x * y;
          mag += std::fabs(x * y);
        }
        const double old = at(c0, bi, i, j, c.m, ldc);
        const double add = c.bias ? bv[static_cast<size_t>(j)] : 0.0;
        ref = c.alpha * ref + (c.beta == 0 ? 0.0 : c.beta * old) + add;
        mag = std::fabs(c.alpha) * mag + std::fabs(c.beta * old) + std::fabs(add);
        const double v = at(got, bi, i, j, c.m, ldc);
        ASSERT_NEAR(v, ref, unit * std::fabs(ref) + accum * mag * 2 + 1e-30)
            << "b=" << bi << " i=" << i << " j=" << j << " m=" << c.m << " n=" << c.n
            << " k=" << c.k << " ta=" << c.ta << " tb=" << c.tb << " ab=" << dtype_name(ab)
            << " c=" << dtype_name(cd);
      }
  // Padding columns are never written.
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = c.n; j < ldc; ++j)
        ASSERT_EQ(at(got, bi, i, j, c.m, ldc), at(c0, bi, i, j, c.m, ldc));
}

TEST(Gemm, MatchesNaiveF64ForEveryDtypeTransposeAndScale) {
  const std::vector<Case> cases = {
      {1, 1, 1, 1, false, false, 1.0f, 0.0f, 0},
      {7, 5, 3, 1, false, false, 1.0f, 0.0f, 0},
      {7, 5, 300, 1, true, false, 0.5f, 0.0f, 2},
      {33, 17, 513, 2, false, true, 1.0f, 1.0f, 1},
      {64, 300, 40, 3, true, true, -2.0f, 0.5f, 3},
      {200, 96, 260, 1, false, false, 1.0f, 2.0f, 0},
      {5, 6, 0, 2, false, false, 1.0f, 3.0f, 0},
      {300, 80, 520, 1, true, true, 1.0f, 0.0f, 0},
      {96, 260, 300, 1, false, true, 1.0f, -1.0f, 5},
      {9, 70, 40, 2, false, true, 1.0f, 0.0f, 1, true},   // row bias, C not read
      {9, 70, 300, 1, true, false, 0.5f, 2.0f, 0, true},  // row bias after beta * C
      {4, 6, 0, 1, false, false, 1.0f, 0.0f, 0, true},    // k = 0: C = bias
  };
  const std::vector<std::pair<DType, DType>> dtypes = {
      {DType::f32, DType::f32},  {DType::bf16, DType::bf16}, {DType::f16, DType::f16},
      {DType::bf16, DType::f32}, {DType::f32, DType::bf16},  {DType::f16, DType::f32},
      {DType::f64, DType::f64}};
  for (const Case& c : cases)
    for (auto [ab, cd] : dtypes) run_case(c, ab, cd);
}

TEST(Gemm, LargeSplitShapesMatchNaive) {
  // Large enough that the grid splits C (by rows, then by columns).
  ASSERT_GT(gemm_grid(512, 128, 256, 1).pieces, 1);
  ASSERT_FALSE(gemm_grid(64, 600, 300, 1).split_m);
  for (auto [ab, cd] : std::vector<std::pair<DType, DType>>{
           {DType::bf16, DType::bf16}, {DType::f32, DType::f32}, {DType::f16, DType::f32}}) {
    run_case({512, 128, 256, 1, false, true, 1.0f, 0.0f, 0}, ab, cd);
    run_case({64, 600, 300, 1, true, false, 1.0f, 1.0f, 0}, ab, cd);
  }
  // A narrow C whose f32 accumulator would exceed the tile bound is computed in sub-tiles.
  run_case({2100, 1100, 16, 1, false, true, 1.0f, 0.5f, 0}, DType::bf16, DType::bf16);
  run_case({600, 200, 64, 1, false, true, 1.0f, 0.0f, 0, true}, DType::bf16, DType::bf16);
}

TEST(Gemm, KSplitShapesMatchNaive) {
  // K much longer than m and n (a weight gradient): the grid splits K into ranges whose f32
  // partials are summed in piece order, then beta * C and the bias are added.
  const GemmGrid g = gemm_grid(40, 24, 2200, 1);
  ASSERT_TRUE(g.split_k);
  ASSERT_EQ(g.pieces, 2);
  ASSERT_TRUE(gemm_grid(16, 16, 20000, 1).split_k);
  ASSERT_EQ(gemm_grid(16, 16, 20000, 1).pieces, 4);
  ASSERT_FALSE(gemm_grid(512, 512, 1024, 1).split_k);  // K < 4 * max(m, n): a C split
  for (auto [ab, cd] : std::vector<std::pair<DType, DType>>{{DType::bf16, DType::bf16},
                                                            {DType::f32, DType::f32},
                                                            {DType::f16, DType::f32},
                                                            {DType::f32, DType::bf16},
                                                            {DType::f64, DType::f64}}) {
    run_case({40, 24, 2200, 1, true, false, 1.0f, 0.0f, 0}, ab, cd);
    run_case({40, 24, 2200, 2, false, true, 0.5f, 2.0f, 3, true}, ab, cd);  // beta, bias
    run_case({16, 16, 20000, 1, true, true, -1.0f, 1.0f, 1}, ab, cd);
  }
}

TEST(Gemm, BetaZeroIgnoresNaNInC) {
  Tensor a = Tensor::ones({4, 4}), b = Tensor::ones({4, 4});
  Tensor c = Tensor::full({4, 4}, NAN);
  gemm(4, 4, 4, 1.0f, {DType::f32, a.raw_data(), 4}, {DType::f32, b.raw_data(), 4}, 0.0f,
       {DType::f32, c.raw_data(), 4});
  for (double v : c.to_doubles()) EXPECT_EQ(v, 4.0);
}

TEST(Gemm, SameBitsWithOneAndTwoThreads) {
  ASSERT_TRUE(gemm_grid(48, 40, 4000, 1).split_k);
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{
             {600, 300, 700}, {64, 900, 520}, {48, 40, 4000}}) {  // M, N and K splits
      Tensor A = random_matrix(1, m, k, 0, dt, 11), B = random_matrix(1, n, k, 0, dt, 12);
      std::vector<Tensor> out;
      for (int threads : {1, 2}) {
        const int saved = num_threads();
        set_num_threads(threads);
        Tensor C = Tensor::empty({m, n}, dt);
        gemm(m, n, k, 1.0f, {dt, A.raw_data(), k}, {dt, B.raw_data(), k, true}, 0.0f,
             {dt, C.raw_data(), n});
        set_num_threads(saved);
        out.push_back(C);
      }
      EXPECT_EQ(std::memcmp(out[0].raw_data(), out[1].raw_data(), out[0].nbytes()), 0)
          << dtype_name(dt) << " " << m << "x" << n << "x" << k;
    }
  }
}

TEST(Gemm, RejectsBadArguments) {
  Tensor a = Tensor::ones({4, 4});
  EXPECT_THROW(gemm(4, 4, 4, 1.0f, {DType::f32, a.raw_data(), 3}, {DType::f32, a.raw_data(), 4},
                    0.0f, {DType::f32, a.raw_data(), 4}),
               Error);
  EXPECT_THROW(gemm(4, 4, 4, 1.0f, {DType::i32, a.raw_data(), 4}, {DType::f32, a.raw_data(), 4},
                    0.0f, {DType::f32, a.raw_data(), 4}),
               Error);
  EXPECT_THROW(gemm(4, 4, 4, 1.0f, {DType::f64, a.raw_data(), 4}, {DType::f32, a.raw_data(), 4},
                    0.0f, {DType::f32, a.raw_data(), 4}),
               Error);
}

}  // namespace
}  // namespace mixprec::cpu
