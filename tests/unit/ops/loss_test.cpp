// cross_entropy: f64 gradient checks, loss and gradient against plain f64 loops, extreme
// logits, ignore_index (including every row ignored), low precision against the f32 kernel,
// thread-count independence, out-of-range targets and other bad input.
#include "mixprec/ops/loss.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

struct Ref {
  double loss;
  std::vector<double> grad;  // d loss / d logits, times grad_out
};

// Plain f64 loops over logits [N, V].
Ref reference(const Tensor& logits, const std::vector<int64_t>& t, int64_t ignore_index,
              double grad_out = 1.0) {
  const std::vector<double> x = logits.to_doubles();
  const auto N = static_cast<size_t>(logits.size(0)), V = static_cast<size_t>(logits.size(1));
  Ref r{0.0, std::vector<double>(x.size(), 0.0)};
  size_t valid = 0;
  for (size_t n = 0; n < N; ++n) valid += t[n] != ignore_index;
  for (size_t n = 0; n < N; ++n) {
    if (t[n] == ignore_index) continue;
    const double* row = x.data() + n * V;
    double m = -INFINITY, s = 0;
    for (size_t v = 0; v < V; ++v) m = std::max(m, row[v]);
    for (size_t v = 0; v < V; ++v) s += std::exp(row[v] - m);
    const auto target = static_cast<size_t>(t[n]);
    r.loss += (m + std::log(s) - row[target]) / static_cast<double>(valid);
    for (size_t v = 0; v < V; ++v)
      r.grad[n * V + v] = (std::exp(row[v] - m) / s - (v == target ? 1.0 : 0.0)) /
                          static_cast<double>(valid) * grad_out;
  }
  if (valid == 0) r.loss = NAN;
  return r;
}

// logits [7, 13] as in the fixtures: row 3 holds logits of scale 40.
Tensor fixture_like_logits(DType dt, uint64_t seed) {
  std::vector<double> v = randn({7, 13}, DType::f64, seed, 2.0).to_doubles();
  const std::vector<double> wide = randn({13}, DType::f64, seed + 1, 40.0).to_doubles();
  std::copy(wide.begin(), wide.end(), v.begin() + 3 * 13);
  return Tensor::from_doubles(v, {7, 13}, dt);
}

const std::vector<int64_t> kTargets = {4, -100, 12, 0, -100, 7, 3};

TEST(CrossEntropy, Gradcheck) {
  auto ce = [](const std::vector<int64_t>& t) {
    return [t](const std::vector<Tensor>& in) {
      return cross_entropy(in[0], Tensor::from_vector(t), -100);
    };
  };
  Tensor x = fixture_like_logits(DType::f64, 1);
  x.set_requires_grad(true, DType::f64);
  expect_gradcheck(ce(kTargets), {x}, "two rows ignored, one wide row");
  expect_gradcheck(ce({-100, -100, 5, -100}), {grad_input({4, 9}, 2)}, "one valid row");
  expect_gradcheck(ce({0, 1, 2}), {grad_input({3, 3}, 3, 3.0)}, "none ignored");
}

TEST(CrossEntropy, MatchesF64Loops) {
  for (DType dt : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
    const std::string what = dtype_name(dt);
    Tensor x = fixture_like_logits(dt, 11).set_requires_grad(true, dt);
    Tensor loss = cross_entropy(x, Tensor::from_vector(kTargets));
    EXPECT_EQ(loss.dtype(), dt == DType::f64 ? DType::f64 : DType::f32) << what;
    EXPECT_EQ(loss.shape(), Shape{}) << what;
    loss.backward(Tensor::full({}, 2.5, loss.dtype()));
    // The reference sees the same rounded logits.
    const Ref ref = reference(x.detach().to(DType::f64), kTargets, -100, 2.5);
    const bool f64 = dt == DType::f64;
    // f32 internally: the loss is good to ~1e-6 relative whatever the storage dtype.
    EXPECT_NEAR(loss.item(), ref.loss, (f64 ? 1e-14 : 2e-6) * std::fabs(ref.loss)) << what;
    EXPECT_EQ(x.grad().dtype(), dt);
    const double ulp = f64                 ? 1e-15
                       : dt == DType::f32  ? 0x1p-23
                       : dt == DType::bf16 ? 0x1p-8
                                           : 0x1p-11;
    expect_close(x.grad(), Tensor::from_doubles(ref.grad, {7, 13}, DType::f64),
                 f64 ? 1e-15 : (dt == DType::f16 ? 0x1p-24 : 1e-7), ulp + (f64 ? 0 : 1e-6),
                 what + " grad");
  }
}

TEST(CrossEntropy, LowPrecisionEqualsF32KernelRounded) {
  // bf16/f16 logits widen exactly: the loss has the f32 kernel's bits, the gradient is the f32
  // kernel's gradient rounded once.
  for (DType dt : {DType::bf16, DType::f16}) {
    const Tensor t = Tensor::from_vector(std::vector<int64_t>{1, 30, -100, 99, 0, 64, 2, 77});
    Tensor x = randn({8, 100}, dt, 21, 3.0).set_requires_grad(true, dt);
    Tensor x32 = x.detach().to(DType::f32).set_requires_grad();
    Tensor loss = cross_entropy(x, t), loss32 = cross_entropy(x32, t);
    EXPECT_TRUE(same_bits(loss, loss32)) << dtype_name(dt);
    loss.backward();
    loss32.backward();
    EXPECT_TRUE(same_bits(x.grad(), x32.grad().to(dt))) << dtype_name(dt);
  }
}

TEST(CrossEntropy, EveryTargetIgnoredGivesNanAndZeroGradient) {
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor x = randn({3, 5}, dt, 31).set_requires_grad(true, dt);
    Tensor loss = cross_entropy(x, Tensor::from_vector(std::vector<int64_t>{-100, -100, -100}));
    EXPECT_TRUE(std::isnan(loss.item()));
    loss.backward();
    EXPECT_EQ(x.grad().dtype(), dt);
    for (double g : x.grad().to_doubles()) EXPECT_EQ(g, 0.0);
  }
  // No rows at all: 0/0 too.
  EXPECT_TRUE(
      std::isnan(cross_entropy(Tensor::zeros({0, 4}), Tensor::zeros({0}, DType::i64)).item()));
}

TEST(CrossEntropy, IgnoreIndexAndTargetDtypes) {
  const Tensor x = randn({5, 6}, DType::f32, 41, 2.0);
  // ignore_index may be a valid class: rows with that target drop out of the mean.
  const std::vector<int64_t> t = {3, 0, 3, 5, 1};
  const Ref ref = reference(x.to(DType::f64), t, 3);
  EXPECT_NEAR(cross_entropy(x, Tensor::from_vector(t), 3).item(), ref.loss, 1e-6 * ref.loss);
  // i32 targets give the same bits as i64.
  const std::vector<int32_t> t32(t.begin(), t.end());
  EXPECT_TRUE(same_bits(cross_entropy(x, Tensor::from_vector(t), 3),
                        cross_entropy(x, Tensor::from_vector(t32), 3)));
  // A strided (non-contiguous) logits view works like its contiguous copy.
  const Tensor xt = randn({6, 5}, DType::f32, 42).transpose(0, 1);
  EXPECT_TRUE(same_bits(cross_entropy(xt, Tensor::from_vector(t)),
                        cross_entropy(xt.contiguous(), Tensor::from_vector(t))));
}

TEST(CrossEntropy, SameBitsWithOneAndTwoThreads) {
  for (DType dt : {DType::f32, DType::bf16}) {
    std::vector<int64_t> t(64);
    for (size_t i = 0; i < t.size(); ++i)
      t[i] = i % 5 == 0 ? -100 : static_cast<int64_t>(i * 77 % 5000);
    auto run = [&] {
      Tensor x = randn({64, 5000}, dt, 51, 3.0).set_requires_grad(true, dt);
      Tensor loss = cross_entropy(x, Tensor::from_vector(t));
      loss.backward();
      return std::vector<Tensor>{loss, x.grad()};
    };
    const auto one = with_threads(1, run), two = with_threads(2, run);
    EXPECT_TRUE(same_bits(one[0], two[0])) << dtype_name(dt) << " loss";
    EXPECT_TRUE(same_bits(one[1], two[1])) << dtype_name(dt) << " grad";
  }
}

TEST(CrossEntropy, OutOfRangeTargetNamesValueAndRow) {
  const Tensor x = Tensor::zeros({4, 13});
  for (int64_t bad : {13, -1, 1000}) {
    try {
      cross_entropy(x, Tensor::from_vector(std::vector<int64_t>{0, -100, bad, 1}));
      ADD_FAILURE() << "no error for target " << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("target " + std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("row 2"), std::string::npos) << msg;
    }
  }
}

TEST(CrossEntropy, BadInputIsAnError) {
  const Tensor t = Tensor::from_vector(std::vector<int64_t>{0, 1});
  EXPECT_THROW(cross_entropy(Tensor::zeros({2}), t), Error);
  EXPECT_THROW(cross_entropy(Tensor::zeros({2, 3, 4}), t), Error);
  EXPECT_THROW(cross_entropy(Tensor::zeros({3, 4}), t), Error);
  EXPECT_THROW(cross_entropy(Tensor::zeros({2, 4}), Tensor::zeros({2, 1}, DType::i64)), Error);
  EXPECT_THROW(cross_entropy(Tensor::zeros({2, 4}), Tensor::zeros({2}, DType::f32)), Error);
  EXPECT_THROW(cross_entropy(Tensor::zeros({2, 4}, DType::i32), t), Error);
  EXPECT_THROW(cross_entropy(Tensor::zeros({2, 0}), t), Error);
  EXPECT_THROW(cross_entropy(Tensor(), t), Error);
}

}  // namespace
}  // namespace mixprec
