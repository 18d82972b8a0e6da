// The matrix-product spellings PyTorch code uses: shapes and rules from torch.matmul's,
// torch.einsum's and torch.addmm's documentation and 1.13 behaviour, checked against
// hand-made products. Values against PyTorch and finite differences are the op registry's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

Tensor vec(std::vector<double> v, Shape shape, DType dtype = DType::f64) {
  return Tensor::from_doubles(v, shape, dtype);
}

// torch.matmul's documented shapes: 1-d operands gain and lose a dim, batch dims broadcast.
TEST(MatmulForms, MatmulShapesFollowTorchMatmul) {
  auto shape_of = [](const Shape& a, const Shape& b) {
    return matmul(Tensor::ones(a), Tensor::ones(b)).shape();
  };
  EXPECT_EQ(shape_of({3}, {3}), Shape{});
  EXPECT_EQ(shape_of({3, 4}, {4}), (Shape{3}));
  EXPECT_EQ(shape_of({4}, {4, 5}), (Shape{5}));
  EXPECT_EQ(shape_of({10, 3, 4}, {4}), (Shape{10, 3}));
  EXPECT_EQ(shape_of({4}, {10, 4, 5}), (Shape{10, 5}));
  EXPECT_EQ(shape_of({10, 3, 4}, {10, 4, 5}), (Shape{10, 3, 5}));
  EXPECT_EQ(shape_of({10, 3, 4}, {4, 5}), (Shape{10, 3, 5}));
  EXPECT_EQ(shape_of({5, 1, 2, 3}, {4, 3, 2}), (Shape{5, 4, 2, 2}));
  EXPECT_EQ(shape_of({2, 3}, {7, 3, 4}), (Shape{7, 2, 4}));
  EXPECT_THROW(shape_of({2, 3, 4}, {3, 4, 2}), Error);  // batch 2 vs 3
}

// Each broadcast batch is the plain product of its slices; gradients sum over the copies.
TEST(MatmulForms, BroadcastBatchesAreThePlainProductsOfTheirSlices) {
  const Tensor a = randn({2, 1, 3, 4}, DType::f64, 1), b = randn({5, 4, 2}, DType::f64, 2);
  const Tensor c = matmul(a, b);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_TRUE(
          same_bits(c.select(0, i).select(0, j),
                    matmul(a.select(0, i).select(0, 0).contiguous(), b.select(0, j).contiguous())));
  expect_gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                   {grad_input({2, 1, 3, 4}, 3), grad_input({5, 4, 2}, 4)}, "broadcast matmul");
  expect_gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                   {grad_input({4}, 5), grad_input({3, 4, 2}, 6)}, "vector @ batch");
}

// Strided 1-d operands (a column of a matrix) are fine, as in PyTorch.
TEST(MatmulForms, StridedVectorsAreAccepted) {
  const Tensor a = randn({3, 4}, DType::f32, 30), w = randn({4, 5}, DType::f32, 31);
  const Tensor col = w.select(1, 2);  // stride 5
  EXPECT_TRUE(same_bits(matmul(a, col), mv(a, col.contiguous())));
  EXPECT_TRUE(same_bits(mv(a, col), mv(a, col.contiguous())));
  EXPECT_TRUE(same_bits(dot(col, col), dot(col.contiguous(), col.contiguous())));
  EXPECT_TRUE(same_bits(matmul(col, w), matmul(col.contiguous(), w)));
}

TEST(MatmulForms, MmMvAndDotAreTheirMatmuls) {
  const Tensor a = randn({3, 4}, DType::f32, 7), b = randn({4, 5}, DType::f32, 8);
  const Tensor v = randn({4}, DType::f32, 9), w = randn({4}, DType::f32, 10);
  EXPECT_TRUE(same_bits(mm(a, b), matmul(a, b)));
  EXPECT_TRUE(same_bits(mv(a, v), matmul(a, v)));
  EXPECT_TRUE(same_bits(dot(v, w), matmul(v, w)));
  EXPECT_EQ(dot(Tensor::zeros({0}), Tensor::zeros({0})).item(), 0.0);  // empty: 0
  EXPECT_THROW(mm(a.view({12}), b), Error);                            // 2-d only
  EXPECT_THROW(mv(a, v.view({4, 1})), Error);                          // a 2-d vector
  EXPECT_THROW(dot(v, randn({5}, DType::f32, 11)), Error);
  EXPECT_THROW(dot(v, w.to(DType::bf16)), Error);  // no promotion in products
}

// addmm(input, m1, m2, beta, alpha) = beta·input + alpha·m1·m2; beta = 0 never reads input.
TEST(MatmulForms, AddmmScalesBothTermsAndBetaZeroIgnoresNaNInInput) {
  const Tensor m1 = vec({1, 2, 3, 4}, {2, 2}), m2 = vec({5, 6, 7, 8}, {2, 2});
  const Tensor input = vec({1, -1}, {2});  // broadcast over rows
  // m1·m2 = [[19, 22], [43, 50]]
  EXPECT_EQ(addmm(input, m1, m2, 0.5, 2.0).to_doubles(),
            (std::vector<double>{38.5, 43.5, 86.5, 99.5}));
  const Tensor nan_input = vec({NAN, INFINITY}, {2});
  EXPECT_EQ(addmm(nan_input, m1, m2, 0.0, 1.0).to_doubles(), (std::vector<double>{19, 22, 43, 50}));
  expect_gradcheck(
      [](const std::vector<Tensor>& in) { return addmm(in[0], in[1], in[2], 0.75, -1.25); },
      {grad_input({1, 3}, 12), grad_input({2, 4}, 13), grad_input({4, 3}, 14)}, "addmm");
  EXPECT_THROW(addmm(vec({1, 2, 3}, {3}), m1, m2), Error);       // does not broadcast to [2, 2]
  EXPECT_THROW(addmm(vec({1, 2, 3}, {3}), m1, m2, 0.0), Error);  // checked with beta 0 too
}

// bf16 operands: the product accumulates in f32 on top of beta·input and is rounded once,
// so addmm equals the f32 computation on the same values rounded to bf16.
TEST(MatmulForms, Bf16AddmmRoundsOnce) {
  const Tensor i = randn({5, 7}, DType::bf16, 15), m1 = randn({5, 33}, DType::bf16, 16),
               m2 = randn({33, 7}, DType::bf16, 17);
  const Tensor want = addmm(i.to(DType::f32), m1.to(DType::f32), m2.to(DType::f32), 0.5, 1.5);
  EXPECT_TRUE(same_bits(addmm(i, m1, m2, 0.5, 1.5), want.to(DType::bf16)));
}

// Under matmul precision medium the GEMM reads bf16 roundings of f32 operands, but the
// gradients are the operands' own dtype (f32), as matmul's.
TEST(MatmulForms, AddmmGradientsKeepTheOperandsDtypeUnderMatmulPrecision) {
  const amp::MatmulPrecision before = amp::matmul_precision();
  amp::set_matmul_precision(amp::MatmulPrecision::medium);
  Tensor m1 = randn({3, 4}, DType::f32, 32), m2 = randn({4, 2}, DType::f32, 33);
  m1.set_requires_grad(true);
  m2.set_requires_grad(true);
  Tensor mid = scale(m1, 1.0);  // a non-leaf operand: its gradient reaches m1 through scale
  Tensor a = randn({3, 4}, DType::f32, 32), b = randn({4, 2}, DType::f32, 33);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  sum(addmm(Tensor::zeros({2}), mid, m2)).backward();
  sum(matmul(a, b)).backward();
  amp::set_matmul_precision(before);
  EXPECT_TRUE(same_bits(m1.grad(), a.grad()));
  EXPECT_TRUE(same_bits(m2.grad(), b.grad()));
}

TEST(MatmulForms, BaddbmmIsAddmmPerBatch) {
  const Tensor i = randn({3, 1, 4}, DType::f64, 18), b1 = randn({3, 2, 5}, DType::f64, 19),
               b2 = randn({3, 5, 4}, DType::f64, 20);
  const Tensor c = baddbmm(i, b1, b2, 0.5, 2.0);
  for (int64_t k = 0; k < 3; ++k)
    expect_close(c.select(0, k),
                 addmm(i.select(0, k).contiguous(), b1.select(0, k).contiguous(),
                       b2.select(0, k).contiguous(), 0.5, 2.0),
                 1e-14, 1e-14, "batch");
  EXPECT_THROW(baddbmm(i, b1, randn({1, 5, 4}, DType::f64, 21)), Error);  // no batch broadcast
}

// torch.einsum's implicit output: the ellipsis dims, then the letters used once in ASCII
// order (uppercase first); a letter twice in one operand is its diagonal.
TEST(MatmulForms, EinsumImplicitOutputOrderAndDiagonals) {
  const Tensor m = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(einsum("ki", {m}).shape(), (Shape{3, 2}));  // i before k: the transpose
  EXPECT_TRUE(same_bits(einsum("ki", {m}).contiguous(), m.transpose(0, 1).contiguous()));
  EXPECT_EQ(einsum("aB", {m}).shape(), (Shape{3, 2}));  // B before a
  EXPECT_EQ(einsum("a...", {Tensor::ones({2, 3, 4})}).shape(), (Shape{3, 4, 2}));
  const Tensor sq = vec({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(einsum("ii", {sq}).item(), 5.0);  // trace
  EXPECT_EQ(einsum("ii->i", {sq}).to_doubles(), (std::vector<double>{1, 4}));
  EXPECT_EQ(einsum("ij->", {m}).item(), 21.0);
  const Tensor u = vec({1, 2}, {2}), v = vec({3, 4, 5}, {3});
  EXPECT_EQ(einsum("i,j", {u, v}).to_doubles(), (std::vector<double>{3, 4, 5, 6, 8, 10}));
  EXPECT_EQ(einsum("i,i", {u, u}).item(), 5.0);
  EXPECT_EQ(einsum("ij,ij->ij", {vec({1, 2, 3}, {1, 3}), m}).to_doubles(),
            (std::vector<double>{1, 4, 9, 4, 10, 18}));  // size-1 dims broadcast
  EXPECT_EQ(einsum("ij,jk->ik", {Tensor::ones({2, 0}), Tensor::ones({1, 3})}).to_doubles(),
            (std::vector<double>(6, 0.0)));  // size 1 broadcasts to 0: an empty sum
  EXPECT_TRUE(same_bits(einsum("ij, jk -> ik", {m, m.transpose(0, 1)}),
                        matmul(m, m.transpose(0, 1).contiguous())));
}

TEST(MatmulForms, EinsumMistakesNameTheEquation) {
  const Tensor m = Tensor::ones({2, 3});
  for (const char* eq : {"ij,jk", "ij->ii", "ij->k", "i$", "ijk", "ij,j..k", "ii"}) {
    const std::string msg = error_of([&] { einsum(eq, {m}); });
    EXPECT_NE(msg.find("einsum"), std::string::npos) << eq << ": " << msg;
  }
  EXPECT_THROW(einsum("ij,jk,kl", {m, m.transpose(0, 1), m}), Error);  // three operands
  EXPECT_THROW(einsum("ij,ij", {m, Tensor::ones({2, 4})}), Error);     // 3 vs 4
  EXPECT_THROW(einsum("ij,jk", {m, Tensor::ones({3, 2}, DType::bf16)}), Error);
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        return einsum("iij,jk->ik", {in[0], in[1]});
      },
      {grad_input({3, 3, 4}, 22), grad_input({4, 2}, 23)}, "einsum with a diagonal");
}

}  // namespace
}  // namespace mixprec
