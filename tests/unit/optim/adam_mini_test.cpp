// Adam-mini: the partition by role and shape, and 10 steps against an f64 reference written
// here from the paper's update rule over the same partition (per head for query/key weights,
// per output row for 2-D weights, one block for 1-D tensors).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/optim/adam_mini.h"
#include "optim_testing.h"

namespace mixprec::optim {
namespace {

using mixprec::testing::randn;

TEST(AdamMiniPartition, HandComputedBlocks) {
  auto check = [](const Shape& s, ParamRole r, int64_t blocks, int64_t size) {
    const AdamMiniPartition p = adam_mini_partition(s, r);
    EXPECT_EQ(p.blocks, blocks) << shape_to_string(s);
    EXPECT_EQ(p.block_size, size) << shape_to_string(s);
  };
  check({32, 16}, ParamRole{.heads = 8}, 8, 64);  // 8 heads of 4 rows x 16
  check({6, 10}, {}, 6, 10);                      // one per output row
  check({2, 3, 4}, {}, 6, 4);  // a stack of two [3, 4] weights: one per row of each
  check({2, 3}, {}, 2, 3);     // and its bias [2, 3]: one per stacked bias
  check({5}, {}, 1, 5);        // whole tensor
  check({}, {}, 1, 1);
  EXPECT_THROW(adam_mini_partition({6, 4}, ParamRole{.heads = 4}), Error);
}

struct RefParam {
  std::vector<double> p, m, v;  // v: one per block
  int64_t block_size;
  double wd;
};

// One Adam-mini step in f64 (the reference implementation's formula).
void reference_step(RefParam& r, const std::vector<double>& g, int t, double lr, double b1,
                    double b2, double eps) {
  const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
  const auto n = static_cast<int64_t>(r.p.size());
  for (int64_t blk = 0; blk < n / r.block_size; ++blk) {
    double sq = 0;
    for (int64_t i = blk * r.block_size; i < (blk + 1) * r.block_size; ++i) sq += g[i] * g[i];
    double& v = r.v[static_cast<size_t>(blk)];
    v = b2 * v + (1 - b2) * sq / static_cast<double>(r.block_size);
    const double h = std::sqrt(v) / std::sqrt(bc2) + eps;
    for (int64_t i = blk * r.block_size; i < (blk + 1) * r.block_size; ++i) {
      r.m[i] = b1 * r.m[i] + (1 - b1) * g[i];
      r.p[i] = r.p[i] * (1 - lr * r.wd) - lr * (r.m[i] / bc1) / h;
    }
  }
}

TEST(AdamMini, MatchesF64ReferenceOfThePartition) {
  const double lr = 1e-2, wd = 0.1, b1 = 0.9, b2 = 0.95, eps = 1e-8;
  const amp::MixedPrecisionPolicy fp32 = testing::make_policy(DType::f32);
  struct Spec {
    const char* name;
    Shape shape;
    ParamRole role;
    int64_t block_size;
  };
  const std::vector<Spec> specs{{"attn.q", {12, 8}, ParamRole{.heads = 4}, 3 * 8},
                                {"mlp.w", {5, 7}, {}, 7},
                                {"norm.g", {9}, ParamRole{.no_weight_decay = true}, 9}};
  ParamList params;
  std::vector<RefParam> ref;
  for (size_t k = 0; k < specs.size(); ++k) {
    params.push_back(
        testing::make_param(specs[k].name, specs[k].shape, 20 + k, fp32, specs[k].role));
    const std::vector<double> p0 = params.back()->master().to_doubles();
    ref.push_back({p0, std::vector<double>(p0.size(), 0.0),
                   std::vector<double>(p0.size() / static_cast<size_t>(specs[k].block_size), 0.0),
                   specs[k].block_size, specs[k].role.no_weight_decay ? 0.0 : wd});
  }
  AdamMini opt(params, lr, wd, AdamMiniOptions{.beta1 = b1, .beta2 = b2, .eps = eps});
  for (int t = 1; t <= 10; ++t) {
    for (size_t k = 0; k < specs.size(); ++k) {
      // Rows of very different scale, so a wrong partition gives visibly wrong step sizes.
      Tensor g = randn(specs[k].shape, DType::f32, 1000 * t + k);
      std::vector<double> gv = g.to_doubles();
      std::vector<float> gf(gv.size());
      for (size_t i = 0; i < gv.size(); ++i)
        gf[i] = static_cast<float>(gv[i] * (1 + static_cast<double>((i * i * 5) % 11)));
      g = Tensor::from_vector(gf, specs[k].shape);
      params[k]->set_grad(g);
      reference_step(ref[k], g.to_doubles(), t, lr, b1, b2, eps);
    }
    opt.step();
    for (size_t k = 0; k < specs.size(); ++k) {
      const std::vector<double> ours = params[k]->master().to_doubles();
      double scale = 0, worst = 0;
      for (size_t i = 0; i < ours.size(); ++i) {
        scale = std::max(scale, std::fabs(ref[k].p[i]));
        worst = std::max(worst, std::fabs(ours[i] - ref[k].p[i]));
      }
      EXPECT_LE(worst / scale, 2e-6) << specs[k].name << " step " << t;
    }
  }
  const StateDict sd = opt.state_dict();
  EXPECT_EQ(sd.at("attn.q.vmean").shape(), (Shape{4}));
  EXPECT_EQ(sd.at("mlp.w.vmean").shape(), (Shape{5}));
  EXPECT_EQ(sd.at("norm.g.vmean").shape(), (Shape{1}));
  const std::vector<double> v = sd.at("mlp.w.vmean").to_doubles();
  for (size_t b = 0; b < v.size(); ++b)
    EXPECT_NEAR(v[b], ref[1].v[b], 1e-6 * ref[1].v[b]) << "mlp.w vmean " << b;
}

}  // namespace
}  // namespace mixprec::optim
