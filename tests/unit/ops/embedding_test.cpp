// embedding: f64 gradient check, exact row copies, the f32 (unrounded) scatter-add gradient
// against plain f64 sums, f32 masters behind a bf16 cast, thread-count independence, bad ids.
#include "mixprec/ops/embedding.h"

#include <gtest/gtest.h>

#include "mixprec/autograd/node.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

TEST(Embedding, Gradcheck) {
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{3, 0, 3, 5, 3, 1}, {2, 3});
  expect_gradcheck([&](const std::vector<Tensor>& in) { return embedding(ids, in[0]); },
                   {grad_input({7, 4}, 1)}, "embedding with repeated ids");
}

TEST(Embedding, ForwardCopiesRowsExactly) {
  for (DType dt : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
    const Tensor w = randn({11, 7}, dt, 2);
    const std::vector<int64_t> ids = {4, 10, 0, 4, 9, 2};
    const Tensor out = embedding(Tensor::from_vector(ids, {2, 3}), w);
    EXPECT_EQ(out.shape(), (Shape{2, 3, 7}));
    EXPECT_EQ(out.dtype(), dt);
    for (size_t i = 0; i < ids.size(); ++i)
      EXPECT_TRUE(
          same_bits(out.view({6, 7}).select(0, static_cast<int64_t>(i)), w.select(0, ids[i])))
          << dtype_name(dt) << " position " << i;
    // i32 ids and a 0-d id.
    const std::vector<int32_t> ids32(ids.begin(), ids.end());
    EXPECT_TRUE(same_bits(embedding(Tensor::from_vector(ids32, {2, 3}), w), out));
    const Tensor one = embedding(Tensor::from_vector(std::vector<int64_t>{9}).view({}), w);
    EXPECT_EQ(one.shape(), Shape{7});
    EXPECT_TRUE(same_bits(one, w.select(0, 9)));
  }
}

TEST(Embedding, GradientIsUnroundedF32SumPerId) {
  // bf16 weight, bf16 upstream gradient: the weight gradient is f32, each row the f32 sum (in
  // position order) of the gradient rows of its id; unused ids get zero rows.
  const int64_t V = 9, D = 5;
  const std::vector<int64_t> ids = {2, 7, 2, 2, 0, 7};
  Tensor w = randn({V, D}, DType::bf16, 3).set_requires_grad(true, DType::f32);
  const Tensor gy = randn({6, D}, DType::bf16, 4);
  embedding(Tensor::from_vector(ids), w).backward(gy);
  const Tensor g = w.grad();
  ASSERT_EQ(g.dtype(), DType::f32);
  const std::vector<double> gv = g.to_doubles(), yv = gy.to_doubles();
  for (int64_t v = 0; v < V; ++v) {
    for (int64_t d = 0; d < D; ++d) {
      float want = 0;  // f32 sum in position order
      for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == v) want += static_cast<float>(yv[i * D + static_cast<size_t>(d)]);
      EXPECT_EQ(gv[static_cast<size_t>(v * D + d)], static_cast<double>(want)) << v << "," << d;
    }
  }
  // The operator's own gradient dtype (before the leaf's accumulation) is f32 too.
  Tensor w16 = randn({V, D}, DType::bf16, 5).set_requires_grad(true, DType::bf16);
  Tensor out = embedding(Tensor::from_vector(ids), w16);
  std::vector<Tensor> grads = {gy};
  EXPECT_EQ(out.grad_fn()->apply(grads)[1].dtype(), DType::f32);
}

TEST(Embedding, F32MastersBehindABf16Cast) {
  Tensor master = randn({6, 4}, DType::f32, 6).set_requires_grad();
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 1, 5, 1});
  const Tensor gy = randn({4, 4}, DType::f32, 7, 1e-3);
  embedding(ids, master.to(DType::bf16)).backward(gy);
  std::vector<double> ref(24, 0.0);  // [6, 4] f64 sums of the gradient rows
  const std::vector<double> y = gy.to_doubles();
  const size_t rows[] = {1, 1, 5, 1};
  for (size_t i = 0; i < 4; ++i)
    for (size_t d = 0; d < 4; ++d) ref[rows[i] * 4 + d] += y[i * 4 + d];
  EXPECT_EQ(master.grad().dtype(), DType::f32);
  // Small gradients keep their f32 precision (no bf16 rounding on the way).
  expect_close(master.grad(), Tensor::from_doubles(ref, {6, 4}, DType::f64), 1e-12, 1e-6,
               "master grad");
}

TEST(Embedding, SameBitsWithOneAndTwoThreads) {
  for (DType dt : {DType::f32, DType::bf16}) {
    std::vector<int64_t> ids(3000);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * i + 7 * i) % 300);
    auto run = [&] {
      Tensor w = randn({300, 64}, dt, 8).set_requires_grad(true, DType::f32);
      Tensor out = embedding(Tensor::from_vector(ids, {30, 100}), w);
      out.backward(randn({30, 100, 64}, dt, 9));
      return std::vector<Tensor>{out, w.grad()};
    };
    const auto one = with_threads(1, run), two = with_threads(2, run);
    EXPECT_TRUE(same_bits(one[0], two[0])) << dtype_name(dt) << " forward";
    EXPECT_TRUE(same_bits(one[1], two[1])) << dtype_name(dt) << " grad";
  }
}

TEST(Embedding, BadInputIsAnError) {
  const Tensor w = Tensor::ones({5, 3});
  for (int64_t bad : {5, -1}) {
    try {
      embedding(Tensor::from_vector(std::vector<int64_t>{0, 4, bad}), w);
      ADD_FAILURE() << "no error for id " << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("id " + std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("position 2"), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(embedding(Tensor::zeros({2}, DType::f32), w), Error);
  EXPECT_THROW(embedding(Tensor::zeros({2}, DType::i64), Tensor::ones({5})), Error);
  EXPECT_THROW(embedding(Tensor::zeros({2}, DType::i64), Tensor::ones({5, 3}, DType::i32)), Error);
  EXPECT_THROW(embedding(Tensor(), w), Error);
}

}  // namespace
}  // namespace mixprec
