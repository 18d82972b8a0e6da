// topk / gather / scatter_add / index_add / concat: f64 gradient checks, values against plain
// loops, low precision against the f32 kernel on the same rounded inputs, thread-count
// independence on MoE-dispatch shapes, ties, NaN, i32 indices, edge shapes, bad input.
#include "mixprec/ops/indexing.h"
#include "mixprec/ops/reduction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/autograd/node.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

// ---- plain reference loops (f64, multi-indices) ----------------------------------------------

std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> out;
  for (double v : t.to_doubles()) out.push_back(static_cast<int64_t>(v));
  return out;
}

Tensor index_tensor(const std::vector<int64_t>& v, const Shape& shape, DType dt = DType::i64) {
  std::vector<double> d(v.begin(), v.end());
  return Tensor::from_doubles(d, shape, dt);
}

Tensor random_index(const Shape& shape, int64_t bound, uint64_t seed) {
  Generator gen(seed);
  std::vector<double> u =
      Tensor::uniform(shape, 0, static_cast<double>(bound), gen, DType::f64).to_doubles();
  for (double& v : u) v = std::floor(v);
  return Tensor::from_doubles(u, shape, DType::i64);
}

std::vector<double> ref_gather(const Tensor& x, int dim, const Tensor& index) {
  const std::vector<double> xv = x.to_doubles();
  const std::vector<int64_t> iv = ints(index);
  std::vector<double> out(iv.size());
  for (size_t e = 0; e < iv.size(); ++e) {
    std::vector<int64_t> idx = unravel(static_cast<int64_t>(e), index.shape());
    idx[static_cast<size_t>(dim)] = iv[e];
    out[e] = xv[static_cast<size_t>(ravel(idx, x.shape()))];
  }
  return out;
}

std::vector<double> ref_scatter_add(const Tensor& x, int dim, const Tensor& index,
                                    const Tensor& src) {
  std::vector<double> out = x.to_doubles();
  const std::vector<double> sv = src.to_doubles();
  const std::vector<int64_t> iv = ints(index);
  for (size_t e = 0; e < iv.size(); ++e) {
    std::vector<int64_t> idx = unravel(static_cast<int64_t>(e), index.shape());
    const double s = sv[static_cast<size_t>(ravel(idx, src.shape()))];
    idx[static_cast<size_t>(dim)] = iv[e];
    out[static_cast<size_t>(ravel(idx, x.shape()))] += s;
  }
  return out;
}

std::vector<double> ref_index_add(const Tensor& x, int dim, const Tensor& index,
                                  const Tensor& source, double alpha) {
  std::vector<double> out = x.to_doubles();
  const std::vector<double> sv = source.to_doubles();
  const std::vector<int64_t> iv = ints(index);
  for (size_t e = 0; e < sv.size(); ++e) {
    std::vector<int64_t> idx = unravel(static_cast<int64_t>(e), source.shape());
    idx[static_cast<size_t>(dim)] = iv[static_cast<size_t>(idx[static_cast<size_t>(dim)])];
    out[static_cast<size_t>(ravel(idx, x.shape()))] += alpha * sv[e];
  }
  return out;
}

// Values and indices of the k best along the last dim of a 2-d x (stable: ties by index).
std::pair<std::vector<double>, std::vector<int64_t>> ref_topk(const Tensor& x, int64_t k,
                                                              bool largest) {
  const std::vector<double> xv = x.to_doubles();
  const int64_t rows = x.size(0), n = x.size(1);
  std::pair<std::vector<double>, std::vector<int64_t>> out;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    auto val = [&](int64_t t) { return xv[static_cast<size_t>(r * n + t)]; };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return largest ? val(a) > val(b) : val(a) < val(b);
    });
    for (int64_t j = 0; j < k; ++j) {
      out.first.push_back(val(order[static_cast<size_t>(j)]));
      out.second.push_back(order[static_cast<size_t>(j)]);
    }
  }
  return out;
}

// ---- gradient checks -------------------------------------------------------------------------

TEST(Indexing, TopkGradcheck) {
  expect_gradcheck([](const std::vector<Tensor>& in) { return topk(in[0], 2).first; },
                   {grad_input({3, 5, 7}, 1)}, "topk k=2 dim -1");
  expect_gradcheck([](const std::vector<Tensor>& in) { return topk(in[0], 3, 0, false).first; },
                   {grad_input({4, 3, 2}, 2)}, "topk smallest dim 0");
  expect_gradcheck([](const std::vector<Tensor>& in) { return topk(in[0], 6, 1).first; },
                   {grad_input({2, 6}, 3)}, "topk k = n");
}

TEST(Indexing, GatherGradcheck) {
  const Tensor i1 = index_tensor({0, 0, 6, 3, 1, 2, 2, 2, 5, 4, 0, 1, 3, 3, 3, 3, 6, 5, 4, 0},
                                 {5, 4});  // repeats within rows
  expect_gradcheck([&](const std::vector<Tensor>& in) { return gather(in[0], 1, i1); },
                   {grad_input({5, 7}, 4)}, "gather dim 1");
  // Index smaller than x in the other dim; rows repeated.
  const Tensor i0 = random_index({6, 2}, 4, 5);
  expect_gradcheck([&](const std::vector<Tensor>& in) { return gather(in[0], 0, i0); },
                   {grad_input({4, 3}, 6)}, "gather dim 0");
  const Tensor i3 = random_index({2, 2, 5}, 3, 7);
  expect_gradcheck([&](const std::vector<Tensor>& in) { return gather(in[0], -1, i3); },
                   {grad_input({2, 3, 3}, 8)}, "gather 3-d dim -1");
}

TEST(Indexing, ScatterAddGradcheck) {
  Tensor idx = random_index({3, 7}, 5, 9);
  idx.data<int64_t>()[7 + 2] = idx.data<int64_t>()[2];  // a collision
  expect_gradcheck([&](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, idx, in[1]); },
                   {grad_input({5, 7}, 10), grad_input({3, 7}, 11)}, "scatter_add dim 0");
  // src larger than index: its extra elements get zero gradient.
  expect_gradcheck([&](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, idx, in[1]); },
                   {grad_input({5, 8}, 12), grad_input({4, 9}, 13)},
                   "scatter_add src larger than index");
  const Tensor i3 = random_index({2, 4, 3}, 2, 14);
  expect_gradcheck([&](const std::vector<Tensor>& in) { return scatter_add(in[0], 1, i3, in[1]); },
                   {grad_input({2, 2, 3}, 15), grad_input({2, 4, 3}, 16)}, "scatter_add 3-d dim 1");
}

TEST(Indexing, IndexAddGradcheck) {
  const Tensor idx = index_tensor({4, 0, 4, 2}, {4});
  for (double alpha : {1.0, -0.5})
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) { return index_add(in[0], 0, idx, in[1], alpha); },
        {grad_input({6, 5}, 17), grad_input({4, 5}, 18)},
        "index_add dim 0 alpha " + std::to_string(alpha));
  const Tensor i1 = index_tensor({1, 5, 1}, {3}, DType::i32);
  expect_gradcheck([&](const std::vector<Tensor>& in) { return index_add(in[0], 1, i1, in[1]); },
                   {grad_input({2, 6, 3}, 19), grad_input({2, 3, 3}, 20)}, "index_add 3-d dim 1");
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return index_add(in[0], -1, i1, in[1], 2.0); },
      {grad_input({3, 6}, 21), grad_input({3, 3}, 22)}, "index_add dim -1");
}

// torch.cat promotes: f32 with bf16 gives f32, the bf16 part widened exactly, and the
// gradient reaches the bf16 input through the cast.
TEST(Indexing, ConcatPromotesMixedDtypesAsTorchCat) {
  const Tensor a =
      Tensor::from_vector(std::vector<float>{1.5f, -2.0f}, {1, 2}).set_requires_grad(true);
  const Tensor b = Tensor::from_vector(std::vector<float>{0.375f, 3.0f, 7.0f, -1.0f}, {2, 2})
                       .to(DType::bf16)
                       .set_requires_grad(true);
  const Tensor c = concat({a, b}, 0);
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(c.to_doubles(), (std::vector<double>{1.5, -2.0, 0.375, 3.0, 7.0, -1.0}));
  sum(c).backward();
  EXPECT_EQ(b.grad().to_doubles(), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(concat({Tensor::ones({2}, DType::i32), Tensor::ones({1}, DType::i64)}, 0).dtype(),
            DType::i64);
}

TEST(Indexing, ConcatGradcheck) {
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        return concat({in[0], in[1], in[2]}, 1);
      },
      {grad_input({2, 3, 5}, 23), grad_input({2, 1, 5}, 24), grad_input({2, 4, 5}, 25)},
      "concat dim 1");
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        return concat({in[0], in[1]}, 0);
      },
      {grad_input({2, 3}, 26), grad_input({4, 3}, 27)}, "concat dim 0");
  // An empty part (no gradient asked: empty leaf gradients are not this op's business) and an
  // input used twice.
  const Tensor empty = Tensor::empty({3, 0}, DType::f64);
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return concat({in[0], empty, in[0]}, -1);
      },
      {grad_input({3, 2}, 28)}, "concat dim -1, empty part, reuse");
}

// ---- values ----------------------------------------------------------------------------------

TEST(Indexing, ValuesMatchReferenceLoops) {
  const Tensor x = randn({5, 7}, DType::f64, 31);
  const Tensor i1 = random_index({5, 4}, 7, 32);
  EXPECT_EQ(gather(x, 1, i1).to_doubles(), ref_gather(x, 1, i1));
  EXPECT_EQ(gather(x, 1, i1).shape(), (Shape{5, 4}));
  // Whole-row indices (the MoE row copy path) next to a row that is not uniform.
  const Tensor rows = randn({6, 40}, DType::f64, 33);
  std::vector<int64_t> rv;
  for (int64_t r : {3, 0, 5, 3, 1, 2, 2, 4, 0}) rv.insert(rv.end(), 40, r);
  rv[40 * 2 + 17] = 1;
  const Tensor ri = index_tensor(rv, {9, 40});
  EXPECT_EQ(gather(rows, 0, ri).to_doubles(), ref_gather(rows, 0, ri));
  const Tensor src = randn({9, 40}, DType::f64, 34);
  expect_close(scatter_add(rows, 0, ri, src),
               Tensor::from_doubles(ref_scatter_add(rows, 0, ri, src), {6, 40}, DType::f64), 1e-12,
               0, "scatter_add rows");
  const Tensor x3 = randn({3, 4, 5}, DType::f64, 35), s3 = randn({3, 6, 5}, DType::f64, 36);
  const Tensor i3 = random_index({2, 6, 5}, 4, 37);
  expect_close(scatter_add(x3, 1, i3, s3),
               Tensor::from_doubles(ref_scatter_add(x3, 1, i3, s3), x3.shape(), DType::f64), 1e-12,
               0, "scatter_add 3-d");
  const Tensor ia = index_tensor({2, 0, 2, 3, 2, 1}, {6});
  const Tensor sa = randn({3, 6, 5}, DType::f64, 38);
  expect_close(index_add(x3, 1, ia, sa, 0.75),
               Tensor::from_doubles(ref_index_add(x3, 1, ia, sa, 0.75), x3.shape(), DType::f64),
               1e-12, 0, "index_add dim 1");
  const Tensor sl = randn({3, 4, 6}, DType::f64, 39);
  const Tensor il = index_tensor({4, 4, 0, 1, 4, 3}, {6});
  expect_close(index_add(x3, 2, il, sl),
               Tensor::from_doubles(ref_index_add(x3, 2, il, sl, 1.0), x3.shape(), DType::f64),
               1e-12, 0, "index_add last dim");
  // concat: each output element comes from the right part.
  const Tensor a = randn({2, 3, 5}, DType::f64, 40), b = randn({2, 1, 5}, DType::f64, 41);
  const Tensor c = concat({a, b, a}, 1);
  ASSERT_EQ(c.shape(), (Shape{2, 7, 5}));
  const std::vector<double> cv = c.to_doubles(), av = a.to_doubles(), bv = b.to_doubles();
  for (int64_t e = 0; e < c.numel(); ++e) {
    const auto idx = unravel(e, c.shape());
    const int64_t j = idx[1];
    const double want = j < 3 ? av[static_cast<size_t>(ravel({idx[0], j, idx[2]}, a.shape()))]
                        : j < 4
                            ? bv[static_cast<size_t>(ravel({idx[0], 0, idx[2]}, b.shape()))]
                            : av[static_cast<size_t>(ravel({idx[0], j - 4, idx[2]}, a.shape()))];
    EXPECT_EQ(cv[static_cast<size_t>(e)], want) << "concat element " << e;
  }
  // gather moves any dtype.
  const Tensor xi = Tensor::arange(0, 12, 1, DType::i64).view({4, 3});
  EXPECT_EQ(gather(xi, 1, index_tensor({2, 2, 0, 1}, {4, 1})).to_doubles(),
            (std::vector<double>{2, 5, 6, 10}));
  // Large-outer and few-outer copy paths, and integer tensors.
  const Tensor ia32 = Tensor::arange(0, 60, 1, DType::i32).view({20, 3});
  EXPECT_EQ(concat({ia32, ia32}, 1).to_doubles()[3], 0);
  EXPECT_EQ(concat({ia32, ia32}, 0).to_doubles()[60], 0);
  EXPECT_EQ(concat({ia32, ia32}, 1).shape(), (Shape{20, 6}));
}

// A row index broadcast over the trailing dims (stride 0, never materialized) gives the same
// bits as the materialized index, forward and backward.
TEST(Indexing, BroadcastRowIndexMatchesMaterializedIndex) {
  const Tensor ids = index_tensor({3, 0, 5, 3, 1, 2, 2, 4, 0}, {9});
  const Tensor rows = ids.as_strided({9, 40}, {1, 0}, 0);  // [9, 40], stride 0 over dim 1
  const Tensor dense = rows.contiguous();
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x0 = randn({6, 40}, dt, 131), s0 = randn({9, 40}, dt, 132);
    const Tensor gy = randn({9, 40}, dt, 133), gz = randn({6, 40}, dt, 134);
    auto run = [&](const Tensor& index) {
      Tensor x = x0.clone().set_requires_grad(true, dt), s = s0.clone().set_requires_grad(true, dt);
      const Tensor y = gather(x, 0, index), z = scatter_add(x, 0, index, s);
      y.backward(gy);
      z.backward(gz);
      return std::vector<Tensor>{y, z, x.grad(), s.grad()};
    };
    const auto a = run(rows), b = run(dense);
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(same_bits(a[i], b[i])) << dtype_name(dt) << " tensor " << i;
    EXPECT_EQ(a[0].to(DType::f64).to_doubles(), ref_gather(x0, 0, dense));
  }
  // Broadcast over two trailing dims, gathered along a middle dim; and a gradcheck.
  const Tensor ids3 = random_index({2, 6}, 5, 135);
  const Tensor idx3 = ids3.as_strided({2, 6, 3, 4}, {6, 1, 0, 0}, 0);
  const Tensor x3 = randn({2, 5, 3, 4}, DType::f64, 136);
  EXPECT_EQ(gather(x3, 1, idx3).to_doubles(), ref_gather(x3, 1, idx3.contiguous()));
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return concat({gather(in[0], 1, idx3), scatter_add(in[0], 1, idx3, in[1])}, 1);
      },
      {grad_input({2, 5, 3, 4}, 137), grad_input({2, 6, 3, 4}, 138)}, "broadcast row index");
  // Range errors are still caught.
  const Tensor bad = index_tensor({0, 6}, {2}).as_strided({2, 40}, {1, 0}, 0);
  EXPECT_THROW(gather(randn({6, 40}, DType::f32, 139), 0, bad), Error);
}

TEST(Indexing, TopkValuesTiesAndNaN) {
  const Tensor x = randn({6, 50}, DType::f64, 51);
  for (int64_t k : {0, 1, 2, 33, 50})
    for (bool largest : {true, false}) {
      auto [v, i] = topk(x, k, -1, largest);
      EXPECT_EQ(i.dtype(), DType::i64);
      EXPECT_EQ(v.shape(), (Shape{6, k}));
      if (k == 0) continue;  // (to_doubles of an empty tensor trips UBSan in copy.cpp)
      const auto ref = ref_topk(x, k, largest);
      EXPECT_EQ(v.to_doubles(), ref.first) << "k " << k;
      EXPECT_EQ(ints(i), ref.second) << "k " << k;
    }
  // Many ties: both the insertion (k <= 32) and the partial_sort path keep index order.
  std::vector<double> tv;
  for (int t = 0; t < 200; ++t) tv.push_back((t * 7) % 5);
  const Tensor tied = Tensor::from_doubles(tv, {2, 100}, DType::bf16);
  for (int64_t k : {3, 20, 32, 33, 64, 100})
    for (bool largest : {true, false}) {
      auto [v, i] = topk(tied, k, 1, largest);
      EXPECT_EQ(ints(i), ref_topk(tied, k, largest).second) << "ties k " << k;
    }
  // Along a middle dim (strided lines).
  const Tensor x3 = randn({2, 9, 3}, DType::f32, 52);
  auto [v3, i3] = topk(x3, 4, 1);
  const auto ref3 = ref_topk(x3.transpose(1, 2).contiguous().view({6, 9}), 4, true);
  EXPECT_EQ(v3.transpose(1, 2).contiguous().to_doubles(), ref3.first);
  EXPECT_EQ(ints(i3.transpose(1, 2).contiguous()), ref3.second);
  // NaN ranks above everything (PyTorch): first for largest, last for smallest.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor xn = Tensor::from_doubles({1, nan, 3, nan, -1}, {5}, DType::f32);
  EXPECT_EQ(ints(topk(xn, 3).second), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(ints(topk(xn, 4, 0, false).second), (std::vector<int64_t>{4, 0, 2, 1}));
}

// ---- low precision ---------------------------------------------------------------------------

TEST(Indexing, LowPrecisionMatchesF32KernelOnRoundedInputs) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const double ulp = dt == DType::bf16 ? 0x1p-8 : 0x1p-11;
    const std::string name = dtype_name(dt);
    const Tensor x = randn({64, 48}, dt, 61), x32 = x.to(DType::f32), x64 = x.to(DType::f64);
    const Tensor src = randn({96, 48}, dt, 62);
    const Tensor idx = random_index({96, 48}, 64, 63);
    // Data movement is exact.
    EXPECT_TRUE(same_bits(gather(x, 0, idx.slice(0, 0, 50)).to(DType::f32),
                          gather(x32, 0, idx.slice(0, 0, 50))))
        << name;
    EXPECT_TRUE(
        same_bits(concat({x, src}, 0).to(DType::f32), concat({x32, src.to(DType::f32)}, 0)));
    auto [tv, ti] = topk(x, 5, 1);
    auto [tv32, ti32] = topk(x32, 5, 1);
    EXPECT_TRUE(same_bits(tv.to(DType::f32), tv32)) << name;
    EXPECT_TRUE(same_bits(ti, ti32)) << name;
    // Sums: f32 accumulation in the f32 kernel's order, rounded once.
    const Tensor sa = scatter_add(x, 0, idx, src);
    EXPECT_TRUE(same_bits(sa, scatter_add(x32, 0, idx, src.to(DType::f32)).to(dt))) << name;
    expect_close(sa, scatter_add(x64, 0, idx, src.to(DType::f64)), 1e-5, ulp, name);
    const Tensor ia = random_index({96}, 64, 64);
    const Tensor ix = index_add(x, 0, ia, src, 0.3);
    EXPECT_TRUE(same_bits(ix, index_add(x32, 0, ia, src.to(DType::f32), 0.3).to(dt))) << name;
    // alpha is taken as f32: the f64 reference uses the same rounded alpha.
    expect_close(ix, index_add(x64, 0, ia, src.to(DType::f64), static_cast<float>(0.3)), 1e-5, ulp,
                 name);
  }
}

TEST(Indexing, LowPrecisionGradients) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const double ulp = dt == DType::bf16 ? 0x1p-8 : 0x1p-11;
    const std::string name = dtype_name(dt);
    auto leaf = [&](const Tensor& t) { return t.clone().set_requires_grad(true, dt); };
    auto leaf64 = [&](const Tensor& t) {
      return testing::rounded(t, dt).set_requires_grad(true, DType::f64);
    };
    const Tensor x = randn({16, 24}, dt, 71), src = randn({40, 24}, dt, 72);
    const Tensor gi = random_index({40, 24}, 16, 73), ii = random_index({40}, 16, 74);
    {  // gather: scatter_add of the gradient in f32, rounded once
      Tensor a = leaf(x), a64 = leaf64(x);
      const Tensor gy = randn({40, 24}, dt, 75);
      gather(a, 0, gi).backward(gy);
      gather(a64, 0, gi).backward(gy.to(DType::f64));
      EXPECT_EQ(a.grad().dtype(), dt);
      expect_close(a.grad(), a64.grad(), 1e-6, ulp, name + " gather dx");
    }
    {  // scatter_add and index_add: grad_x = grad, grad_src = (alpha *) gathered grad
      Tensor a = leaf(x), s = leaf(src), a64 = leaf64(x), s64 = leaf64(src);
      const Tensor gy = randn({16, 24}, dt, 76);
      scatter_add(a, 0, gi, s).backward(gy);
      scatter_add(a64, 0, gi, s64).backward(gy.to(DType::f64));
      EXPECT_TRUE(same_bits(a.grad(), gy)) << name;
      expect_close(s.grad(), s64.grad(), 0, 0, name + " scatter_add dsrc (exact)");
      Tensor b = leaf(x), t = leaf(src), b64 = leaf64(x), t64 = leaf64(src);
      index_add(b, 0, ii, t, 1.5).backward(gy);
      index_add(b64, 0, ii, t64, 1.5).backward(gy.to(DType::f64));
      EXPECT_TRUE(same_bits(b.grad(), gy)) << name;
      EXPECT_EQ(t.grad().dtype(), dt);
      expect_close(t.grad(), t64.grad(), 0, ulp, name + " index_add dsource");
    }
    {  // topk and concat: placements and slices, exact
      Tensor a = leaf(x), a64 = leaf64(x);
      const Tensor gy = randn({16, 3}, dt, 77);
      topk(a, 3).first.backward(gy);
      topk(a64, 3).first.backward(gy.to(DType::f64));
      expect_close(a.grad(), a64.grad(), 0, 0, name + " topk dx");
      Tensor c = leaf(x), d = leaf(src.slice(0, 0, 16));
      concat({c, d}, 1).backward(randn({16, 48}, dt, 78));
      EXPECT_TRUE(same_bits(d.grad(), randn({16, 48}, dt, 78).slice(1, 24, 48).contiguous()));
    }
  }
}

// Gradients arriving in another float dtype are accepted; each input's gradient comes back in
// its own dtype and shape.
TEST(Indexing, AcceptsGradientsOfAnotherFloatDtype) {
  const DType dt = DType::bf16;
  Tensor x = randn({6, 4}, dt, 81).set_requires_grad(true, dt);
  Tensor s = randn({3, 4}, dt, 82).set_requires_grad(true, dt);
  const Tensor idx = index_tensor({1, 5, 1}, {3});
  const std::vector<Tensor> outs = {topk(x, 2).first, gather(x, 0, random_index({3, 4}, 6, 83)),
                                    scatter_add(x, 0, random_index({3, 4}, 6, 84), s),
                                    index_add(x, 0, idx, s, 2.0), concat({x, s}, 0)};
  for (const Tensor& y : outs) {
    std::vector<Tensor> grads{randn(y.shape(), DType::f32, 85)};
    NoGradGuard no_grad;
    const std::vector<Tensor> g = y.grad_fn()->apply(grads);
    EXPECT_EQ(g[0].dtype(), dt) << y.grad_fn()->name();
    EXPECT_EQ(g[0].shape(), x.shape()) << y.grad_fn()->name();
    const std::string node = y.grad_fn()->name();
    if (node == "ScatterAddBackward" || node == "IndexAddBackward" || node == "ConcatBackward") {
      const Tensor& gs = g.back();
      EXPECT_EQ(gs.dtype(), dt) << y.grad_fn()->name();
      EXPECT_EQ(gs.shape(), s.shape()) << y.grad_fn()->name();
    }
  }
}

TEST(Indexing, I32AndI64IndicesAgree) {
  const Tensor x = randn({8, 6}, DType::f32, 91), src = randn({5, 6}, DType::f32, 92);
  const Tensor i64 = random_index({5, 6}, 8, 93), i32 = i64.to(DType::i32);
  EXPECT_TRUE(same_bits(gather(x, 0, i64), gather(x, 0, i32)));
  EXPECT_TRUE(same_bits(scatter_add(x, 0, i64, src), scatter_add(x, 0, i32, src)));
  const Tensor r64 = random_index({5}, 8, 94);
  EXPECT_TRUE(same_bits(index_add(x, 0, r64, src), index_add(x, 0, r64.to(DType::i32), src)));
}

TEST(Indexing, EdgeShapes) {
  const Tensor x = randn({4, 3}, DType::f32, 101);
  EXPECT_EQ(gather(x, 0, Tensor::empty({0, 3}, DType::i64)).shape(), (Shape{0, 3}));
  EXPECT_TRUE(same_bits(
      index_add(x, 0, Tensor::empty({0}, DType::i64), Tensor::empty({0, 3}, DType::f32)), x));
  EXPECT_TRUE(same_bits(
      scatter_add(x, 1, Tensor::empty({4, 0}, DType::i32), Tensor::empty({4, 0}, DType::f32)), x));
  EXPECT_EQ(topk(x, 0, 0).first.shape(), (Shape{0, 3}));
  EXPECT_TRUE(same_bits(concat({x}, 1), x));
  EXPECT_EQ(concat({Tensor::empty({0, 3}), Tensor::empty({0, 3})}, 0).shape(), (Shape{0, 3}));
}

// ---- determinism -----------------------------------------------------------------------------

// MoE token dispatch: router topk, tokens gathered per expert slot, expert outputs scattered /
// index_added back, with many collisions per token row.
TEST(Indexing, SameBitsWithOneAndTwoThreads) {
  // Sizes split every kernel into several fixed chunks (topk needs > 32K router logits).
  const int64_t tokens = 512, d = 256, slots = 1024, routed = 2048;
  const Tensor slot_token = random_index({slots}, tokens, 113);  // [slots] -> token
  Tensor row_index = Tensor::empty({slots, d}, DType::i64);      // slot_token per row
  for (int64_t s = 0; s < slots; ++s)
    std::fill_n(row_index.data<int64_t>() + s * d, d, slot_token.data<int64_t>()[s]);
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x0 = randn({tokens, d}, dt, 111), logits0 = randn({routed, 64}, dt, 112);
    const Tensor gy = randn({tokens, 2 * d}, dt, 114), gw = randn({routed, 2}, dt, 115);
    auto body = [&] {
      Tensor x = x0.clone().set_requires_grad(true, dt);
      Tensor logits = logits0.clone().set_requires_grad(true, dt);
      auto [w, experts] = topk(logits, 2);
      // [slots, d], the row index broadcast over d (stride 0) and also materialized
      Tensor dispatched = gather(x, 0, slot_token.as_strided({slots, d}, {1, 0}, 0));
      Tensor combined = index_add(x, 0, slot_token, dispatched, 0.5);
      Tensor scattered = scatter_add(combined, 0, row_index, dispatched);
      Tensor out = concat({scattered, combined}, 1);
      out.backward(gy);
      w.backward(gw);
      return std::vector<Tensor>{w, experts, dispatched, out, x.grad(), logits.grad()};
    };
    const auto one = with_threads(1, body), two = with_threads(2, body);
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(same_bits(one[i], two[i])) << dtype_name(dt) << " tensor " << i;
  }
}

// The saved index may be the caller's tensor: overwriting it before backward is caught, and
// topk's returned indices are the caller's to overwrite.
TEST(Indexing, SavedIndicesAreSafeFromTheCaller) {
  Tensor x = randn({4, 3}, DType::f64, 121).set_requires_grad(true, DType::f64);
  Tensor ix = index_tensor({0, 1, 2}, {1, 3});
  const Tensor y = gather(x, 0, ix);
  Tensor ia = index_tensor({3, 0}, {2});
  const Tensor s = randn({2, 3}, DType::f64, 122).set_requires_grad(true, DType::f64);
  const Tensor z = index_add(x, 0, ia, s);
  {
    NoGradGuard no_grad;
    ix.copy_from(index_tensor({9, 9, 9}, {1, 3}));
    ia.copy_from(index_tensor({-1, 0}, {2}));
  }
  EXPECT_THROW(y.backward(Tensor::ones({1, 3}, DType::f64)), Error);
  EXPECT_THROW(z.backward(Tensor::ones({4, 3}, DType::f64)), Error);
  Tensor t = Tensor::from_doubles({1, 4, 2}, {3}, DType::f64).set_requires_grad(true, DType::f64);
  auto [v, i] = topk(t, 1);
  {
    NoGradGuard no_grad;
    i.copy_from(Tensor::zeros({1}, DType::i64));
  }
  v.backward(Tensor::ones({1}, DType::f64));
  EXPECT_EQ(t.grad().to_doubles(), (std::vector<double>{0, 1, 0}));
}

// ---- errors ----------------------------------------------------------------------------------

TEST(Indexing, BadInputIsAnError) {
  const Tensor x = Tensor::ones({4, 3});
  const Tensor idx = index_tensor({0, 1, 2}, {1, 3});
  // Out of range: the message names the value and the bound.
  try {
    gather(x, 0, index_tensor({0, 7, 1}, {1, 3}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[0, 4)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gather(x, 0, index_tensor({0, -1, 1}, {1, 3})), Error);
  EXPECT_THROW(scatter_add(x, 0, index_tensor({4, 0, 0}, {1, 3}), Tensor::ones({1, 3})), Error);
  EXPECT_THROW(index_add(x, 0, index_tensor({9}, {1}), Tensor::ones({1, 3})), Error);
  EXPECT_THROW(index_add(x, 1, index_tensor({-2}, {1}, DType::i32), Tensor::ones({4, 1})), Error);
  // Index dtype and shapes.
  EXPECT_THROW(gather(x, 0, Tensor::zeros({1, 3}, DType::f32)), Error);
  EXPECT_THROW(gather(x, 0, index_tensor({0, 1, 2}, {3})), Error);                 // rank
  EXPECT_THROW(gather(x, 0, index_tensor({0, 0, 0, 0}, {1, 4})), Error);           // wider than x
  EXPECT_THROW(gather(x, 2, idx), Error);                                          // dim
  EXPECT_THROW(scatter_add(x, 0, idx, Tensor::ones({1, 2})), Error);               // src < index
  EXPECT_THROW(scatter_add(x, 0, idx, Tensor::ones({1, 3}, DType::bf16)), Error);  // dtypes
  EXPECT_THROW(scatter_add(x, 0, idx, Tensor::ones({1, 3, 1})), Error);
  EXPECT_THROW(index_add(x, 0, index_tensor({0, 1}, {1, 2}), Tensor::ones({2, 3})), Error);
  EXPECT_THROW(index_add(x, 0, index_tensor({0, 1}, {2}), Tensor::ones({3, 3})), Error);
  EXPECT_THROW(index_add(x, 0, index_tensor({0, 1}, {2}), Tensor::ones({2, 4})), Error);
  EXPECT_THROW(index_add(x, 0, index_tensor({0, 1}, {2}), Tensor::ones({2, 3}, DType::f16)), Error);
  EXPECT_THROW(index_add(Tensor::ones({4}, DType::i32), 0, index_tensor({0}, {1}),
                         Tensor::ones({1}, DType::i32)),
               Error);
  // topk
  EXPECT_THROW(topk(x, 4, 1), Error);
  EXPECT_THROW(topk(x, -1), Error);
  EXPECT_THROW(topk(x, 1, 2), Error);
  EXPECT_THROW(topk(Tensor::full({}, 1.0), 1), Error);
  EXPECT_THROW(topk(Tensor::ones({3}, DType::i64), 1), Error);
  // concat
  EXPECT_THROW(concat({}, 0), Error);
  EXPECT_THROW(concat({x, Tensor::ones({3, 2})}, 1), Error);
  EXPECT_THROW(concat({x, Tensor::ones({4})}, 0), Error);
  EXPECT_THROW(concat({x, x}, 2), Error);
  EXPECT_THROW(concat({x, Tensor()}, 0), Error);
  EXPECT_THROW(concat({Tensor::full({}, 1.0), Tensor::full({}, 1.0)}, 0), Error);
}

}  // namespace
}  // namespace mixprec
