// sum / mean / max / norm: f64 gradient checks, values against plain f64 loops, low precision
// against the f32 kernel on the same rounded inputs, thread-count independence, ties, NaN,
// keepdim / negative dims / 0-d / empty shapes, bad input.
#include "mixprec/ops/reduction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/autograd/node.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

enum class Op { sum, mean, norm, max };

struct Ref {
  std::vector<double> value;
  std::vector<int64_t> index;  // max only
};

// Plain f64 loops over x viewed as [outer, n, inner] (dim < 0: every element).
Ref reference(const Tensor& x, int dim, Op op) {
  const std::vector<double> v = x.to_doubles();
  int64_t outer = 1, n = x.numel(), inner = 1;
  if (dim >= 0) {
    n = x.size(dim);
    for (int d = 0; d < dim; ++d) outer *= x.size(d);
    for (int d = dim + 1; d < x.ndim(); ++d) inner *= x.size(d);
  }
  Ref r;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double acc = op == Op::max ? -INFINITY : 0.0;
      int64_t arg = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double e = v[static_cast<size_t>((o * n + k) * inner + i)];
        if (op == Op::max) {
          if (e > acc) acc = e, arg = k;
        } else {
          acc += op == Op::norm ? e * e : e;
        }
      }
      if (op == Op::mean) acc /= static_cast<double>(n);
      if (op == Op::norm) acc = std::sqrt(acc);
      r.value.push_back(acc);
      r.index.push_back(arg);
    }
  }
  return r;
}

Tensor run(Op op, const Tensor& x, int64_t dim, bool keepdim = false) {
  switch (op) {
    case Op::sum:
      return sum(x, dim, keepdim);
    case Op::mean:
      return mean(x, dim, keepdim);
    case Op::norm:
      return norm(x, dim, keepdim);
    case Op::max:
      return max(x, dim, keepdim).first;
  }
  return {};
}

Tensor run_all(Op op, const Tensor& x) {
  switch (op) {
    case Op::sum:
      return sum(x);
    case Op::mean:
      return mean(x);
    case Op::norm:
      return norm(x);
    case Op::max:
      return max(x);
  }
  return {};
}

const char* op_name(Op op) {
  static const char* names[] = {"sum", "mean", "norm", "max"};
  return names[static_cast<int>(op)];
}

constexpr Op kOps[] = {Op::sum, Op::mean, Op::norm, Op::max};

TEST(Reduction, Gradcheck) {
  for (Op op : kOps) {
    const std::string name = op_name(op);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return run_all(op, in[0]); },
                     {grad_input({3, 4, 5}, 1)}, name + " all");
    for (int64_t dim : {0, 1, -1})
      expect_gradcheck([&](const std::vector<Tensor>& in) { return run(op, in[0], dim); },
                       {grad_input({3, 4, 5}, 2)}, name + " dim " + std::to_string(dim));
    expect_gradcheck([&](const std::vector<Tensor>& in) { return run(op, in[0], 1, true); },
                     {grad_input({2, 6, 3}, 3)}, name + " keepdim");
    // A strided (transposed) input goes through the view's backward.
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) { return run(op, in[0].transpose(0, 1), 0); },
        {grad_input({5, 4}, 4)}, name + " of a transposed view");
  }
}

TEST(Reduction, ValuesMatchF64Loops) {
  const Tensor x = randn({3, 7, 5}, DType::f64, 11);
  for (Op op : kOps) {
    for (int dim : {0, 1, 2}) {
      const Ref ref = reference(x, dim, op);
      const Tensor got = run(op, x, dim);
      Shape expected_shape = x.shape();
      expected_shape.erase(expected_shape.begin() + dim);
      ASSERT_EQ(got.shape(), expected_shape);
      const std::vector<double> g = got.to_doubles();
      for (size_t i = 0; i < g.size(); ++i)
        EXPECT_NEAR(g[i], ref.value[i], 1e-12) << op_name(op) << " dim " << dim << " at " << i;
      if (op == Op::max) {
        const std::vector<double> idx = max(x, dim).second.to_doubles();
        for (size_t i = 0; i < idx.size(); ++i)
          EXPECT_EQ(static_cast<int64_t>(idx[i]), ref.index[i]) << "argmax dim " << dim;
      }
    }
    const Tensor all = run_all(op, x);
    EXPECT_EQ(all.shape(), Shape{});
    EXPECT_NEAR(all.item(), reference(x, -1, op).value[0], 1e-12) << op_name(op) << " all";
  }
  // f32 over a long row uses several chunks: still within f32 accumulation error.
  const Tensor big = randn({100003}, DType::f32, 12);
  const double ref = reference(big, -1, Op::sum).value[0];
  EXPECT_NEAR(sum(big).item(), ref, 100003 * 0x1p-24 * 4);
  EXPECT_NEAR(norm(big).item(), reference(big, -1, Op::norm).value[0], 1e-3);
  EXPECT_EQ(sum(Tensor::ones({(1 << 20) + 37})).item(), (1 << 20) + 37);  // exact in f32
}

TEST(Reduction, GradientValues) {
  // sum: ones; mean: 1/n; norm: x/|x|; max: one-hot at the argmax.
  const Tensor x0 = Tensor::from_doubles({3, -4, 0, 1, 2, 2}, {2, 3}, DType::f64);
  auto grad_of = [&](auto fn) {
    Tensor x = x0.clone().set_requires_grad(true, DType::f64);
    fn(x).backward(Tensor::ones(fn(x0).shape(), DType::f64));
    return x.grad().to_doubles();
  };
  EXPECT_EQ(grad_of([](const Tensor& x) { return sum(x, 1); }),
            (std::vector<double>{1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return mean(x, 0); }),
            (std::vector<double>{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}));
  expect_close(
      Tensor::from_doubles(grad_of([](const Tensor& x) { return norm(x, 1); }), {6}, DType::f64),
      Tensor::from_doubles({0.6, -0.8, 0, 1 / 3., 2 / 3., 2 / 3.}, {6}, DType::f64), 1e-15, 0,
      "norm gradient");
  // Ties: the first maximal element takes the whole gradient.
  EXPECT_EQ(grad_of([](const Tensor& x) { return max(x, 1).first; }),
            (std::vector<double>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return max(x); }),
            (std::vector<double>{1, 0, 0, 0, 0, 0}));
}

TEST(Reduction, MaxIndicesAreTheCallersToOverwrite) {
  Tensor x = Tensor::from_doubles({1, 4, 2, 7, 0, 3}, {2, 3}, DType::f32).set_requires_grad();
  auto [v, i] = max(x, 1);
  {
    NoGradGuard no_grad;
    i.copy_from(Tensor::full({2}, 100.0, DType::i64));
  }
  v.backward(Tensor::ones({2}, DType::f32));
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{0, 1, 0, 1, 0, 0}));
}

TEST(Reduction, MaxTiesAndNaN) {
  const Tensor x = Tensor::from_doubles({1, 5, 5, 2, 7, 7, 7, 0}, {2, 4}, DType::bf16);
  auto [v, i] = max(x, 1);
  EXPECT_EQ(v.to_doubles(), (std::vector<double>{5, 7}));
  EXPECT_EQ(i.to_doubles(), (std::vector<double>{1, 0}));
  EXPECT_EQ(i.dtype(), DType::i64);
  // Column ties: the first row wins.
  const Tensor xc = Tensor::from_doubles({4, 1, 0, 4, 2, 0}, {2, 3}, DType::f16);
  EXPECT_EQ(max(xc, 0).second.to_doubles(), (std::vector<double>{0, 1, 0}));
  // Ties across chunk boundaries of a long row (and across threads): the first one wins.
  Tensor big = Tensor::zeros({3, 50000}, DType::f32);
  for (int64_t c : {7, 20000, 40000}) big.data<float>()[c] = 3;  // row 0
  for (int64_t c : {40000, 20001}) big.data<float>()[50000 + c] = 3;
  for (int threads : {1, 2}) {
    auto [bv, bi] = with_threads(threads, [&] { return max(big, 1); });
    EXPECT_EQ(bi.to_doubles(), (std::vector<double>{7, 20001, 0}));
    EXPECT_EQ(with_threads(threads, [&] { return max(big.view({150000})); }).item(), 3);
  }
  // Column ties across row blocks.
  Tensor col = Tensor::zeros({300, 3}, DType::f32);
  col.data<float>()[250 * 3 + 1] = 1;
  col.data<float>()[70 * 3 + 1] = 1;
  EXPECT_EQ(max(col, 0).second.to_doubles(), (std::vector<double>{0, 70, 0}));
  // NaN is the maximum; the first NaN wins (PyTorch propagates NaN through max).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor xn = Tensor::from_doubles({1, nan, 9, nan}, {4}, DType::f32);
  auto [nv, ni] = max(xn, 0);
  EXPECT_TRUE(std::isnan(nv.item()));
  EXPECT_EQ(ni.item(), 1);
  EXPECT_TRUE(std::isnan(max(xn).item()));
  // Long rows (vector path): NaN after an inf wins; the first of two infs wins; columns too.
  Tensor row = randn({2, 1000}, DType::bf16, 25);
  {
    NoGradGuard no_grad;
    row.select(0, 0).slice(0, 300, 301).copy_from(Tensor::full({1}, INFINITY));
    row.select(0, 0).slice(0, 700, 701).copy_from(Tensor::full({1}, nan));
    row.select(0, 1).slice(0, 600, 601).copy_from(Tensor::full({1}, INFINITY));
    row.select(0, 1).slice(0, 900, 901).copy_from(Tensor::full({1}, INFINITY));
  }
  EXPECT_EQ(max(row, 1).second.to_doubles(), (std::vector<double>{700, 600}));
  EXPECT_EQ(max(row.transpose(0, 1), 0).second.to_doubles(), (std::vector<double>{700, 600}));
}

TEST(Reduction, ShapesKeepdimNegativeDimsZeroDimAndEmpty) {
  const Tensor x = randn({2, 3, 4}, DType::f32, 21);
  EXPECT_EQ(sum(x, 1, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(mean(x, -1, true).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(norm(x, -3).shape(), (Shape{3, 4}));
  auto [mv, mi] = max(x, -2, true);
  EXPECT_EQ(mv.shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(mi.shape(), (Shape{2, 1, 4}));
  EXPECT_TRUE(same_bits(sum(x, -1), sum(x, 2)));
  EXPECT_TRUE(same_bits(sum(x, 1, true).view({2, 4}), sum(x, 1)));
  // 0-d input: dim 0 / -1 reduce it to itself.
  const Tensor s = Tensor::full({}, 2.5, DType::f32);
  EXPECT_EQ(sum(s, 0).shape(), Shape{});
  EXPECT_EQ(sum(s, -1, true).item(), 2.5);
  EXPECT_EQ(max(s, 0).second.item(), 0);
  EXPECT_EQ(norm(Tensor::full({}, -3.0, DType::f32)).item(), 3);
  // Empty: sum 0, mean NaN, norm 0; a reduction over a non-empty dim of an empty tensor is
  // empty.
  const Tensor e = Tensor::empty({0, 3}, DType::bf16);
  EXPECT_EQ(sum(e).item(), 0);
  EXPECT_TRUE(std::isnan(mean(e).item()));
  EXPECT_EQ(norm(e).item(), 0);
  EXPECT_EQ(sum(e, 0).to_doubles(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(sum(e, 1).shape(), (Shape{0}));
  EXPECT_EQ(max(e, 1).first.shape(), (Shape{0}));
}

TEST(Reduction, NormGradientIsZeroAtZero) {
  Tensor x = Tensor::zeros({2, 3}, DType::f64).set_requires_grad(true, DType::f64);
  norm(x, 1).backward(Tensor::ones({2}, DType::f64));
  EXPECT_EQ(x.grad().to_doubles(), std::vector<double>(6, 0.0));
  Tensor y = Tensor::zeros({4}, DType::bf16).set_requires_grad(true, DType::bf16);
  norm(y).backward();
  EXPECT_EQ(y.grad().to_doubles(), std::vector<double>(4, 0.0));
}

// The bf16/f16 kernel accumulates exactly like the f32 kernel (same order, f32 math) and
// rounds once, so its result is the f32 kernel's result rounded: bit-equal. Both lie within
// one output ulp plus the f32 accumulation error of the exact f64 result.
TEST(Reduction, LowPrecisionMatchesF32KernelOnRoundedInputs) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const double ulp = dt == DType::bf16 ? 0x1p-8 : 0x1p-11;
    const Tensor x = randn({6, 300, 40}, dt, 31);
    const Tensor x32 = x.to(DType::f32), x64 = x.to(DType::f64);
    for (Op op : kOps) {
      for (int64_t dim : {0, 1, 2}) {
        const std::string what =
            std::string(op_name(op)) + " " + dtype_name(dt) + " dim " + std::to_string(dim);
        const Tensor got = run(op, x, dim);
        EXPECT_EQ(got.dtype(), dt);
        EXPECT_TRUE(same_bits(got, run(op, x32, dim).to(dt))) << what;
        // Sums may cancel: the absolute error bound scales with sum |x| (~ n for randn).
        const double acc_err = static_cast<double>(x.size(dim)) * 0x1p-24 * 4;
        expect_close(got, run(op, x64, dim), acc_err, ulp, what);
      }
      EXPECT_TRUE(same_bits(run_all(op, x), run_all(op, x32).to(dt))) << op_name(op);
    }
  }
}

TEST(Reduction, LowPrecisionGradients) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const double ulp = dt == DType::bf16 ? 0x1p-8 : 0x1p-11;
    for (Op op : kOps) {
      const std::string what = std::string(op_name(op)) + " " + dtype_name(dt);
      Tensor x = randn({4, 9, 6}, dt, 41).set_requires_grad(true, dt);
      Tensor x64 = testing::rounded(x, dt).set_requires_grad(true, DType::f64);
      const Tensor gy = randn({4, 6}, dt, 42);
      run(op, x, 1).backward(gy);
      run(op, x64, 1).backward(gy.to(DType::f64));
      EXPECT_EQ(x.grad().dtype(), dt) << what;
      EXPECT_EQ(x.grad().shape(), x.shape()) << what;
      expect_close(x.grad(), x64.grad(), 1e-6, ulp, what);
    }
  }
}

// A gradient arriving in f32 for a bf16 op (or bf16 for an f64 op) is accepted, and the
// result comes back in the input's dtype and shape.
TEST(Reduction, AcceptsGradientsOfAnotherFloatDtype) {
  for (Op op : kOps) {
    Tensor x = randn({3, 5}, DType::bf16, 51).set_requires_grad(true, DType::bf16);
    const Tensor y = run(op, x, 0);
    std::vector<Tensor> grads{randn(y.shape(), DType::f32, 52)};
    NoGradGuard no_grad;
    const std::vector<Tensor> gx = y.grad_fn()->apply(grads);
    ASSERT_EQ(gx.size(), 1u);
    EXPECT_EQ(gx[0].dtype(), DType::bf16) << op_name(op);
    EXPECT_EQ(gx[0].shape(), x.shape()) << op_name(op);
  }
  Tensor x = randn({3, 5}, DType::f64, 53).set_requires_grad(true, DType::f64);
  const Tensor y = mean(x);
  std::vector<Tensor> grads{Tensor::ones({}, DType::bf16)};
  NoGradGuard no_grad;
  const std::vector<Tensor> gx = y.grad_fn()->apply(grads);
  EXPECT_EQ(gx[0].dtype(), DType::f64);
  EXPECT_EQ(gx[0].to_doubles(), std::vector<double>(15, 1.0 / 15));
  EXPECT_EQ(sum(x).grad_fn(), nullptr);  // no history under no-grad
}

TEST(Reduction, SameBitsWithOneAndTwoThreads) {
  for (DType dt : {DType::f32, DType::bf16}) {
    // Big enough for several chunks per row, several row blocks per column and many rows.
    const Tensor x0 = randn({300, 1030}, dt, 61);
    const Tensor grad_rows = randn({300}, dt, 62), grad_cols = randn({1030}, dt, 63);
    for (Op op : kOps) {
      for (int64_t dim : {-2, 0, 1}) {  // -2: reduce everything
        auto body = [&] {
          Tensor x = x0.clone().set_requires_grad(true, dt);
          Tensor y = dim == -2 ? run_all(op, x) : run(op, x, dim);
          y.backward(dim == -2 ? Tensor::full({}, 0.75, dt) : dim == 0 ? grad_cols : grad_rows);
          return std::vector<Tensor>{y, x.grad()};
        };
        const auto one = with_threads(1, body), two = with_threads(2, body);
        for (size_t i = 0; i < one.size(); ++i)
          EXPECT_TRUE(same_bits(one[i], two[i]))
              << op_name(op) << " " << dtype_name(dt) << " dim " << dim << " tensor " << i;
      }
    }
  }
}

// torch.sum of an int32, uint8 or bool tensor returns int64, summed exactly.
TEST(Reduction, SumOfIntegersIsI64AsTorchSum) {
  const Tensor x =
      Tensor::from_vector(std::vector<int32_t>{2147483647, 5, -3, 2147483647, 1, 1}, {2, 3});
  const Tensor all = sum(x);
  EXPECT_EQ(all.dtype(), DType::i64);
  EXPECT_EQ(all.data<int64_t>()[0], int64_t{2147483647} * 2 + 5 - 3 + 2);
  const Tensor rows = sum(x, 1);
  EXPECT_EQ(rows.shape(), (Shape{2}));
  EXPECT_EQ(rows.data<int64_t>()[0], int64_t{2147483647} + 2);
  EXPECT_EQ(rows.data<int64_t>()[1], int64_t{2147483647} + 2);
  const Tensor cols = sum(x, 0, /*keepdim=*/true);
  EXPECT_EQ(cols.shape(), (Shape{1, 3}));
  EXPECT_EQ(cols.data<int64_t>()[2], -2);
  EXPECT_EQ(sum(Tensor::ones({300}, DType::u8)).data<int64_t>()[0], 300);  // no u8 wraparound
  EXPECT_EQ(sum(Tensor::ones({7}, DType::boolean)).data<int64_t>()[0], 7);
}

TEST(Reduction, BadInputIsAnError) {
  const Tensor x = Tensor::ones({2, 3});
  EXPECT_THROW(sum(x, 2), Error);
  EXPECT_THROW(mean(x, -3), Error);
  EXPECT_THROW(norm(Tensor::ones({2}, DType::i64), 0), Error);
  EXPECT_THROW(max(Tensor::ones({2}, DType::f8_e4m3fn)), Error);
  EXPECT_THROW(max(Tensor::empty({0}, DType::f32)), Error);
  EXPECT_THROW(max(Tensor::empty({2, 0}, DType::f32), 1), Error);
  EXPECT_THROW(sum(Tensor()), Error);
  EXPECT_THROW(sum(Tensor::empty({2}, DType::f32, Device::meta)), Error);
}

}  // namespace
}  // namespace mixprec
