// The sharded runtime on a real 2-rank job against the plain model, which every rank also
// runs locally on the whole global batch (no communication in the reference). Rank r trains
// on rows [r B/W, (r+1) B/W) of the batch; its pieces' gradients must match the plain model's
// gradient slices up to the summation order of the two halves (f32: relative 1e-5).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "mixprec/dist/sharded_model.h"
#include "mixprec/models/transformer/transformer.h"
#include "mixprec/optim/adamw.h"
#include "mpi_test_env.h"
#include "unit/models/models_testing.h"

namespace mixprec::dist {
namespace {

using mixprec::testing::world;
using models::testing::tiny_config;
using models::testing::token_grid;

std::vector<double> piece_of(const Tensor& full, const optim::Parameter& piece) {
  const std::vector<double> all = full.reshape({-1}).to_doubles();
  const auto b = static_cast<std::ptrdiff_t>(piece.element_offset());
  return {all.begin() + b, all.begin() + b + piece.master().numel()};
}

TEST(ShardedModelMpi, GradientsMatchThePlainModelOnTheWholeBatch) {
  for (const auto& [kind, precision, tolerance] :
       {std::tuple{"gpt", "fp32", 1e-5}, std::tuple{"moe", "fp32", 1e-5},
        std::tuple{"gpt", "bf16-mixed", 1e-2}, std::tuple{"moe", "bf16-mixed", 1e-2}}) {
    SCOPED_TRACE(std::string(kind) + " " + precision);
    const amp::MixedPrecisionPolicy policy = amp::preset(precision);
    config::ModelConfig mc = tiny_config(kind);
    mc.moe.aux_loss_weight = 0;  // load balancing over a rank's rows is not the global one
    mc.moe.z_loss_weight = 0;
    const int W = world().size(), r = world().rank();
    const int64_t B = 2 * W, T = 10;
    const Tensor x = token_grid(B, T, mc.vocab_size), y = token_grid(B, T, mc.vocab_size, 1);

    models::Transformer plain = models::testing::transformer(mc);
    plain.materialize(5, policy);
    plain.loss(x, y).total.backward();

    models::Transformer desc = models::testing::transformer(mc);
    ShardedModel sharded(desc, world(), policy);
    sharded.materialize(5);
    sharded.begin_step(true);
    const int64_t rows = B / W;
    desc.loss(x.slice(0, r * rows, (r + 1) * rows).contiguous(),
              y.slice(0, r * rows, (r + 1) * rows).contiguous())
        .total.backward();
    sharded.finish_backward();

    double worst = 0;
    std::string where;
    for (const auto& piece : sharded.parameters()) {
      const optim::Parameter& p = plain.parameters().at(piece->name());
      EXPECT_EQ(piece_of(p.master(), *piece), piece->master().to_doubles()) << piece->name();
      const std::vector<double> want = piece_of(p.grad(), *piece);
      const std::vector<double> got = piece->grad().to_doubles();
      double scale = 0;
      for (const double v : want) scale = std::max(scale, std::abs(v));
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double err = std::abs(want[i] - got[i]) / std::max(scale, 1e-30);
        if (err > worst) {
          worst = err;
          where = piece->name() + "[" + std::to_string(i) + "]";
        }
      }
    }
    EXPECT_LT(worst, tolerance) << "worst relative gradient error at " << where;
  }
}

}  // namespace
}  // namespace mixprec::dist
