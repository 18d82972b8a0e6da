// The reverse pass on graphs made of Tensor's own differentiable members (views, casts,
// copies), where every gradient is known in closed form.
#include "mixprec/autograd/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "mixprec/autograd/function.h"
#include "mixprec/autograd/grad_mode.h"

namespace mixprec {
namespace {

Tensor iota(const Shape& shape, DType dt = DType::f32) {
  return Tensor::arange(0, static_cast<double>(shape_numel(shape)), 1, dt).reshape(shape);
}

// y = sum over elements of x * w (w fixed): a node written the way ops write theirs.
class WeightedSum final : public Node {
 public:
  explicit WeightedSum(Tensor w) : w_(std::move(w)) {}
  const char* name() const override { return "WeightedSum"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    EXPECT_TRUE(w_.defined()) << "saved tensor used after release";
    const double g = grads[0].item();
    std::vector<double> v = w_.to_doubles();
    for (double& x : v) x *= g;
    return {Tensor::from_doubles(v, w_.shape(), DType::f32)};
  }
  void release_saved() override { w_ = Tensor(); }
  bool saved_released() const { return !w_.defined(); }

 private:
  Tensor w_;
};

Tensor weighted_sum(const Tensor& x, const Tensor& w,
                    std::shared_ptr<WeightedSum>* node_out = nullptr) {
  const std::vector<double> a = x.to_doubles(), b = w.to_doubles();
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  Tensor y = Tensor::full({}, s);
  if (any_requires_grad({&x})) {
    auto node = std::make_shared<WeightedSum>(w.contiguous().detach());
    connect(*node, {x});
    set_history(y, node);
    if (node_out) *node_out = node;
  }
  return y;
}

TEST(Autograd, LeafFlagsAndDetach) {
  Tensor x = Tensor::ones({2, 3});
  EXPECT_FALSE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  x.set_requires_grad();
  EXPECT_TRUE(x.requires_grad());
  Tensor v = x.transpose(0, 1);
  EXPECT_TRUE(v.requires_grad());
  EXPECT_FALSE(v.is_leaf());
  EXPECT_THROW(v.set_requires_grad(false), Error);
  Tensor d = v.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.shares_storage_with(x));
  EXPECT_THROW(Tensor::ones({2}, DType::i32).set_requires_grad(), Error);
}

TEST(Autograd, ViewsRouteGradientsToTheRightElements) {
  Tensor x = iota({3, 4}).set_requires_grad();
  Tensor w = iota({2, 3});
  // x[:, 1:3] transposed -> [2, 3]; d/dx = w placed at those elements.
  Tensor y = weighted_sum(x.slice(1, 1, 3).transpose(0, 1), w);
  y.backward();
  const std::vector<double> g = x.grad().to_doubles();
  // w[r][c] multiplies x[c][1 + r].
  const std::vector<double> expect = {0, 0, 3, 0, 0, 1, 4, 0, 0, 2, 5, 0};
  EXPECT_EQ(g, expect);
  EXPECT_EQ(x.grad().dtype(), DType::f32);
}

// Every kind of view, checked element by element against its storage offsets: reshapes
// and whole-tensor permutes take shortcuts in ViewBackward (no zero fill, or no copy), the
// rest the general scatter. The allocator's cache is first filled with NaN blocks, so a
// buffer that missed its zero fill shows up.
TEST(Autograd, EveryViewRoutesItsGradientLikeItsStorageOffsets) {
  const Shape shape{2, 3, 4};
  using ViewFn = Tensor (*)(const Tensor&);
  const std::vector<std::pair<const char*, ViewFn>> views = {
      {"reshape",
       [](const Tensor& t) {
         return t.reshape({6, 4});
       }},
      {"view same shape",
       [](const Tensor& t) {
         return t.view({2, 3, 4});
       }},
      {"permute",
       [](const Tensor& t) {
         return t.permute({2, 0, 1});
       }},
      {"transpose", [](const Tensor& t) { return t.transpose(0, 2); }},
      {"unsqueeze then permute",
       [](const Tensor& t) {
         return t.view({2, 1, 3, 4}).permute({3, 1, 0, 2});
       }},
      {"slice", [](const Tensor& t) { return t.slice(2, 1, 3); }},
      {"select", [](const Tensor& t) { return t.select(1, 2); }},
      {"slice of a transpose", [](const Tensor& t) { return t.transpose(0, 1).slice(0, 1, 3); }},
  };
  for (const auto& [name, make] : views) {
    for (int i = 0; i < 8; ++i) Tensor::full({64}, std::nan(""));  // NaN blocks in the cache
    Tensor x = iota(shape).set_requires_grad();
    const Tensor v = make(x);
    const Tensor w =
        Tensor::arange(1, static_cast<double>(v.numel()) + 1, 1, DType::f32).reshape(v.shape());
    weighted_sum(v, w).backward();
    std::vector<double> expect(static_cast<size_t>(shape_numel(shape)), 0.0);
    const std::vector<double> wv = w.to_doubles();
    for (int64_t flat = 0; flat < v.numel(); ++flat) {
      int64_t rest = flat, at = v.offset() - x.offset();
      for (int64_t d = v.ndim() - 1; d >= 0; --d) {
        at += (rest % v.size(d)) * v.strides()[static_cast<size_t>(d)];
        rest /= v.size(d);
      }
      expect[static_cast<size_t>(at)] += wv[static_cast<size_t>(flat)];
    }
    EXPECT_EQ(x.grad().to_doubles(), expect) << name;
  }
}

// A gradient that arrives laid out as its view (as attention hands back dq, dk, dv) is read
// through the source's strides instead of copied; the values must be those of the general
// scatter, also for a source that is itself a permuted view, and for a gradient laid out
// otherwise.
TEST(Autograd, PermutedViewsReadAGradientLaidOutAsTheView) {
  const Shape shape{2, 3, 4};
  const Tensor g_storage = iota({4, 2, 3}).transpose(0, 2).contiguous();  // [3, 2, 4] memory
  for (bool laid_out_as_view : {true, false}) {
    // x -> s = x.permute (dense, not row-major) -> v = s.permute back to x's order.
    Tensor x = iota(shape).set_requires_grad();
    const Tensor s = x.permute({1, 0, 2});  // [3, 2, 4]
    const Tensor v = s.permute({1, 0, 2});  // [2, 3, 4], row-major over x
    // The gradient of v, with v's values g[i][j][k] = 100 + i·12 + j·4 + k.
    Tensor g = (Tensor::arange(100, 124, 1, DType::f32)).reshape(shape);
    if (!laid_out_as_view) g = g.transpose(0, 1).contiguous().transpose(0, 1);  // other strides
    v.backward(g);
    EXPECT_EQ(x.grad().to_doubles(), g.contiguous().to_doubles()) << laid_out_as_view;
    EXPECT_TRUE(x.grad().is_contiguous());
  }
  // A gradient with strides unlike its view's takes the general scatter.
  Tensor x = iota(shape).set_requires_grad();
  const Tensor p = x.permute({2, 0, 1});
  const Tensor g = g_storage.view({3, 2, 4}).permute({2, 1, 0});  // strides unlike p's
  p.backward(g);
  std::vector<double> expect(24);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k)
        expect[static_cast<size_t>(i * 12 + j * 4 + k)] =
            g.select(0, k).select(0, i).select(0, j).item();
  EXPECT_EQ(x.grad().to_doubles(), expect);
  // One laid out as its view (strides of size-1 dims aside) is read in place: the node before
  // the view is handed the gradient's own storage.
  class SeesGrad final : public Node {
   public:
    const char* name() const override { return "SeesGrad"; }
    std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
      seen = grads[0];
      return {grads[0]};
    }
    Tensor seen;
  };
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {{shape, {2, 0, 1}},
                                                                     {{2, 1, 3}, {2, 1, 0}}};
  for (const auto& [src_shape, dims] : cases) {
    Tensor y = iota(src_shape).set_requires_grad();
    auto sees = std::make_shared<SeesGrad>();
    Tensor mid = y.detach();
    connect(*sees, {y});
    set_history(mid, sees);
    const Tensor q = mid.permute(dims);
    Tensor gq = iota(src_shape).permute(dims);                           // q's layout
    if (src_shape[1] == 1) gq = gq.as_strided({3, 1, 2}, {1, 7, 3}, 0);  // but the size-1 dim
    q.backward(gq);
    EXPECT_EQ(sees->seen.raw_data(), gq.raw_data()) << shape_to_string(src_shape);
    EXPECT_EQ(y.grad().to_doubles(), iota(src_shape).to_doubles()) << shape_to_string(src_shape);
  }
}

// Gradients meeting at one input add in place only into a tensor nobody else holds: a node
// that hands out a tensor it keeps (or the same tensor to two inputs) must find it unchanged.
TEST(Autograd, GradientsAddInPlaceOnlyIntoATensorNobodyElseHolds) {
  // Hands its kept tensor to both of its inputs.
  class HandsOutKept final : public Node {
   public:
    explicit HandsOutKept(Tensor kept) : kept_(std::move(kept)) {}
    const char* name() const override { return "HandsOutKept"; }
    std::vector<Tensor> apply(std::vector<Tensor>&) override { return {kept_, kept_}; }
    Tensor kept_;
  };
  // Two paths into x, through ViewBackward; or the same tensor twice into one leaf.
  for (const bool through_views : {true, false}) {
    Tensor x = iota({4}).set_requires_grad();
    const Tensor a = through_views ? x.view({4}) : x, b = through_views ? x.view({4}) : x;
    auto node = std::make_shared<HandsOutKept>(Tensor::full({4}, 2.0f));
    Tensor y = Tensor::full({}, 0);
    connect(*node, {a, b});
    set_history(y, node);
    y.backward();
    EXPECT_EQ(node->kept_.to_doubles(), (std::vector<double>{2, 2, 2, 2})) << through_views;
    EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{4, 4, 4, 4})) << through_views;
  }
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCallsAndPaths) {
  Tensor x = iota({4}).set_requires_grad();
  Tensor w = Tensor::ones({4});
  // Two uses of x in one graph: gradients from both paths add.
  Tensor y1 = weighted_sum(x, w);
  Tensor y2 = weighted_sum(x.view({2, 2}).transpose(0, 1).contiguous(), iota({2, 2}));
  Tensor y = Tensor::full({}, 0);
  {
    // y = y1 + y2 through a two-input node.
    class Add2 final : public Node {
     public:
      const char* name() const override { return "Add2"; }
      std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {g[0], g[0]}; }
    };
    auto node = std::make_shared<Add2>();
    connect(*node, {y1, y2});
    set_history(y, node);
  }
  y.backward();
  // d y2 / d x: x viewed [[x0,x1],[x2,x3]]ᵀ = [[x0,x2],[x1,x3]] weighted by [[0,1],[2,3]].
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{1, 3, 2, 4}));
  weighted_sum(x, w).backward();
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{2, 4, 3, 5}));
  x.set_grad(Tensor());
  weighted_sum(x, w).backward();
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{1, 1, 1, 1}));
}

TEST(Autograd, LowPrecisionPathsGiveF32LeafGradients) {
  Tensor x = iota({4}).set_requires_grad();
  Tensor xb = x.to(DType::bf16);
  EXPECT_TRUE(xb.requires_grad());
  weighted_sum(xb, Tensor::full({4}, 0.1)).backward();
  ASSERT_EQ(x.grad().dtype(), DType::f32);
  // The gradient went through the cast's backward unchanged (0.1 as f32).
  for (double g : x.grad().to_doubles()) EXPECT_EQ(g, static_cast<double>(0.1f));
  Tensor y = iota({4}).set_requires_grad(true, DType::f64);
  weighted_sum(y, Tensor::ones({4})).backward();
  EXPECT_EQ(y.grad().dtype(), DType::f64);
}

TEST(Autograd, LeafGradientNeverAliasesTheCallersTensor) {
  Tensor x = iota({3}).set_requires_grad();
  Tensor g = Tensor::full({3}, 2.0);
  x.backward(g);  // a leaf as the root: its gradient is the caller's tensor, so it is copied
  x.backward(g);
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{4, 4, 4}));
  EXPECT_EQ(g.to_doubles(), (std::vector<double>{2, 2, 2}));
  EXPECT_FALSE(x.grad().shares_storage_with(g));
}

TEST(Autograd, SavedTensorsFreedAfterBackwardUnlessRetained) {
  Tensor x = iota({3}).set_requires_grad();
  std::shared_ptr<WeightedSum> node;
  Tensor y = weighted_sum(x, Tensor::ones({3}), &node);
  y.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_FALSE(node->saved_released());
  y.backward();
  EXPECT_TRUE(node->saved_released());
  EXPECT_EQ(x.grad().to_doubles(), (std::vector<double>{2, 2, 2}));
  EXPECT_THROW(y.backward(), Error);
}

TEST(Autograd, NoGradGuardRecordsNothingAndNests) {
  Tensor x = iota({3}).set_requires_grad();
  {
    NoGradGuard outer;
    { NoGradGuard inner; }
    EXPECT_FALSE(GradMode::is_enabled());
    Tensor v = x.view({3, 1});
    EXPECT_FALSE(v.requires_grad());
    EXPECT_FALSE(weighted_sum(x, x).requires_grad());
  }
  EXPECT_TRUE(GradMode::is_enabled());
}

TEST(Autograd, BadBackwardCallsAreErrors) {
  Tensor x = iota({3});
  EXPECT_THROW(x.backward(), Error);  // no grad
  Tensor y = iota({3}).set_requires_grad().view({3, 1});
  EXPECT_THROW(y.backward(), Error);  // not a scalar, no gradient given
  EXPECT_THROW(y.backward(Tensor::ones({2})), Error);
  y.backward(Tensor::ones({3, 1}));
  // copy_from records nothing, so it refuses tensors that need history.
  Tensor leaf = iota({3}).set_requires_grad();
  EXPECT_THROW(leaf.copy_from(iota({3})), Error);
  NoGradGuard g;
  leaf.copy_from(iota({3}));
}

TEST(Autograd, EngineRunsLaterNodesFirstDeterministically) {
  // A diamond x -> (a, b) -> y: both branches must complete before x's accumulator runs,
  // and repeated runs give identical bits.
  std::vector<double> first;
  for (int rep = 0; rep < 3; ++rep) {
    Tensor x = iota({5}).set_requires_grad();
    Tensor a = x.to(DType::bf16).to(DType::f32);
    Tensor b = x.slice(0, 0, 5);
    Tensor y = weighted_sum(a, Tensor::full({5}, 1.0 / 3));
    Tensor z = weighted_sum(b, Tensor::full({5}, 1.0 / 7));
    y.backward();
    z.backward();
    if (rep == 0) first = x.grad().to_doubles();
    EXPECT_EQ(x.grad().to_doubles(), first);
  }
}

}  // namespace
}  // namespace mixprec
