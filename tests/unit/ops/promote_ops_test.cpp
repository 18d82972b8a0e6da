// stack, where, index_put, addcmul / addcdiv and the comparisons: dtype promotion as
// torch.result_type gives it, exact selection, index_put's duplicates and its backward
// (derivatives.yaml), comparisons in the promoted dtype (each PyTorch value checked in
// torch 1.13). Values against PyTorch and finite differences are the op registry's.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

constexpr DType f32 = DType::f32, bf16 = DType::bf16, f64 = DType::f64;

Tensor vec(std::vector<double> v, DType dtype = f32) {
  const Shape shape{static_cast<int64_t>(v.size())};
  return Tensor::from_doubles(v, shape, dtype);
}

std::vector<double> bools(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::boolean);
  return t.to_doubles();
}

// torch.stack promotes (f32 + bf16 -> f32, f32 + f64 -> f64) and casts each gradient back.
TEST(PromoteOps, StackPromotesAndGradientsKeepTheirDtypes) {
  Tensor a = vec({1, 2}, bf16), b = vec({3, 4}, f32);
  a.set_requires_grad(true, bf16);
  const Tensor s = stack({a, b}, -1);
  EXPECT_EQ(s.dtype(), f32);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.to_doubles(), (std::vector<double>{1, 3, 2, 4}));
  sum(s).backward();
  EXPECT_EQ(a.grad().to_doubles(), (std::vector<double>{1, 1}));
  EXPECT_EQ(stack({b, vec({1, 2}, f64)}).dtype(), f64);
  EXPECT_THROW(stack({}), Error);
  EXPECT_THROW(stack({b, vec({1, 2, 3})}), Error);
  EXPECT_THROW(stack({b, b}, 3), Error);  // dims -3..2 for [2]
}

// where selects without arithmetic: inf and NaN in the branch not taken never leak, and
// each branch's gradient is g where it was taken.
TEST(PromoteOps, WhereSelectsExactlyAndPromotesLikeResultType) {
  const Tensor cond = gt(vec({1, -1, 1}), 0.0);
  Tensor x = vec({INFINITY, NAN, 2}, f32), y = vec({NAN, 5, INFINITY}, f32);
  x.set_requires_grad(true);
  y.set_requires_grad(true);
  const Tensor w = where(cond, x, y);
  EXPECT_EQ(w.to_doubles()[0], INFINITY);
  EXPECT_EQ(w.to_doubles()[1], 5.0);
  EXPECT_EQ(w.to_doubles()[2], 2.0);
  sum(w).backward();
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(y.grad().to_doubles(), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ(where(cond, vec({1, 2, 3}, bf16), vec({1, 2, 3}, f32)).dtype(), f32);
  EXPECT_EQ(where(cond, vec({1, 2, 3}, bf16), vec({1, 2, 3}, f64)).dtype(), f64);
  EXPECT_EQ(where(cond, vec({1, 2, 3}, bf16), vec({1, 2, 3}, DType::f16)).dtype(), f32);
  EXPECT_EQ(where(cond, vec({1, 2, 3}, bf16), 0.0).dtype(), bf16);  // a number does not widen
  EXPECT_EQ(where(cond, vec({1, 2, 3}, bf16), 0.0).to_doubles(), (std::vector<double>{1, 0, 3}));
  EXPECT_EQ(x.where(cond, y).to_doubles()[1], 5.0);  // the method: where(cond, x, y)
  const Tensor ints = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  EXPECT_EQ(where(cond, ints, 0.5).dtype(), f32);  // torch: a float number makes it float
  EXPECT_EQ(where(cond, ints, 0.5).to_doubles(), (std::vector<double>{1, 0.5, 3}));
  EXPECT_THROW(where(vec({1, 0, 1}), x, y), Error);  // a float condition
}

// Duplicate indices: accumulate adds them; a plain put keeps the last (PyTorch's CPU
// kernel; undefined in its docs). The backward (derivatives.yaml): x's gradient is zeroed
// where written unless accumulate; every value gets g at its index, duplicates included.
TEST(PromoteOps, IndexPutDuplicatesAndItsBackward) {
  const Tensor idx = Tensor::from_vector<int64_t>({0, 2, 2}, {3});
  for (bool accumulate : {false, true}) {
    Tensor x = Tensor::zeros({5});
    Tensor v = vec({1, 2, 3});
    x.set_requires_grad(true);
    v.set_requires_grad(true);
    const Tensor out = index_put(x, {idx}, v, accumulate);
    EXPECT_EQ(out.to_doubles(), accumulate ? (std::vector<double>{1, 0, 5, 0, 0})
                                           : (std::vector<double>{1, 0, 3, 0, 0}));
    out.backward(vec({10, 20, 30, 40, 50}));
    EXPECT_EQ(x.grad().to_doubles(), accumulate ? (std::vector<double>{10, 20, 30, 40, 50})
                                                : (std::vector<double>{0, 20, 0, 40, 50}));
    EXPECT_EQ(v.grad().to_doubles(), (std::vector<double>{10, 30, 30}));
  }
  // Two index tensors broadcast together, negative indices, a scalar value, a boolean mask.
  const Tensor m = Tensor::zeros({2, 3});
  const Tensor rows = Tensor::from_vector<int64_t>({0, -1}, {2});
  const Tensor cols = Tensor::from_vector<int64_t>({2}, {1});
  EXPECT_EQ(index_put(m, {rows, cols}, vec({7})).to_doubles(),
            (std::vector<double>{0, 0, 7, 0, 0, 7}));
  const Tensor mask = gt(Tensor::from_doubles({1, 0, 1, 0, 0, 1}, {2, 3}, f32), 0.5);
  EXPECT_EQ(m.index_put({mask}, vec({1, 2, 3})).to_doubles(),
            (std::vector<double>{1, 0, 2, 0, 0, 3}));
  EXPECT_NE(error_of([&] {
              index_put(m, {Tensor::from_vector<int64_t>({2}, {1})}, vec({1}));
            }).find("out of bounds"),
            std::string::npos);
  EXPECT_THROW(index_put(m, {rows}, vec({1, 2, 3}, bf16)), Error);  // dtypes must match
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return index_put(in[0], {rows}, in[1], true); },
      {grad_input({2, 3}, 1), grad_input({3}, 2)}, "index_put accumulate");
}

TEST(PromoteOps, AddcmulAndAddcdivPromoteAndRoundOnce) {
  const Tensor i = randn({4, 6}, bf16, 3), t1 = randn({4, 6}, bf16, 4), t2 = randn({6}, f32, 5);
  const Tensor r = addcmul(i, t1, t2, 0.5);
  EXPECT_EQ(r.dtype(), f32);
  EXPECT_TRUE(same_bits(r, add(i.to(f32), mul(scale(t1.to(f32), 0.5), t2))));
  const Tensor b = randn({4, 6}, bf16, 6), c = randn({4, 6}, bf16, 7);
  EXPECT_TRUE(same_bits(addcdiv(b, c, b, 2.0),
                        add(b.to(f32), div(scale(c.to(f32), 2.0), b.to(f32))).to(bf16)));
  EXPECT_EQ(addcdiv(vec({1}), vec({1}), vec({0})).item(), INFINITY);
  const Tensor ints = Tensor::from_vector<int32_t>({1, 2}, {2});
  EXPECT_NE(error_of([&] {
              addcdiv(vec({1, 2}), ints, ints);
            }).find("integer division"),
            std::string::npos);
  EXPECT_EQ(addcdiv(ints, ints, vec({2, 4})).to_doubles(), (std::vector<double>{1.5, 2.5}));
}

// Two tensors compare in the promoted dtype; a number is first rounded to the tensor's.
TEST(PromoteOps, ComparisonsReturnBoolInThePromotedDtype) {
  EXPECT_EQ(bools(eq(vec({0.1}, f32), vec({0.1}, f64))), (std::vector<double>{0}));
  EXPECT_EQ(bools(eq(vec({0.1}, f32), 0.1)), (std::vector<double>{1}));
  EXPECT_EQ(bools(eq(vec({1.0039}, bf16), vec({1.0039}, f32))), (std::vector<double>{0}));
  EXPECT_EQ(bools(lt(Tensor::from_vector<int32_t>({1}, {1}), vec({1.5}))),
            (std::vector<double>{1}));
  EXPECT_EQ(bools(eq(vec({NAN}), vec({NAN}))), (std::vector<double>{0}));
  EXPECT_EQ(bools(ne(vec({NAN}), vec({NAN}))), (std::vector<double>{1}));
  const Tensor a = vec({1, 2, 3}), b = vec({2});
  EXPECT_EQ(bools(lt(a, b)), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(bools(le(a, b)), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(bools(gt(a, b)), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(bools(ge(a, 2.0)), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(lt(Tensor::ones({2, 1}), Tensor::ones({3})).shape(), (Shape{2, 3}));
  Tensor g = vec({1});
  g.set_requires_grad(true);
  EXPECT_FALSE(gt(g, 0.0).requires_grad());
  amp::AutocastGuard guard(bf16);  // any policy: still bool
  EXPECT_EQ(gt(vec({1}), vec({0})).dtype(), DType::boolean);
}

}  // namespace
}  // namespace mixprec
