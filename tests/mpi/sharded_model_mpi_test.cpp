// The sharded runtime on a real 2-rank job against the plain model, which every rank also
// runs locally on the whole global batch (no communication in the reference). Rank r trains
// on rows [r B/W, (r+1) B/W) of the batch; its pieces' gradients must match the plain model's
// gradient slices up to the summation order of the two halves (f32: relative 1e-5).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <tuple>

#include "mixprec/amp/compute_scope.h"
#include "mixprec/amp/fp8_weights.h"
#include "mixprec/backend/backend.h"
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

// FSDP's FP8 all-gather on 2 ranks: every gather's bytes (the communicator's ring count) are
// the wire formula's (FP8 weights 1 byte an element, the rest 2, no padding), the FP8
// weights' part half of what the bf16 gather moves for them, and each gathered weight is the
// quantized whole master (the ranks' shards gathered and cast at once), for a tensorwise, a
// 128x128, a rowwise and an MX recipe (the last two gather grad_input's own cast for the
// backward: one more FP8 gather of the last block, which stays from the forward).
TEST(ShardedModelMpi, Fp8AllGatherMovesHalfTheBytesOfBf16) {
  const config::ModelConfig mc = models::testing::fp8_tiny_config();
  const int W = world().size(), r = world().rank();
  const Tensor x = token_grid(2, 8, mc.vocab_size).slice(0, r, r + 1).contiguous();
  const Tensor y = token_grid(2, 8, mc.vocab_size, 1).slice(0, r, r + 1).contiguous();
  for (const char* recipe_name : {"tensorwise", "deepseek_v3", "rowwise", "mxfp8_cublas"}) {
    SCOPED_TRACE(recipe_name);
    amp::MixedPrecisionPolicy policy = amp::preset("bf16-mixed");
    policy.linear_recipe = amp::find_any_linear_recipe(recipe_name);
    policy.linear_skip = {"lm_head"};
    // One step's all-gather bytes: the forward gathers every unit, the backward every block
    // but the last again (reshard after forward).
    uint64_t amax_bytes = 0;  // the FP8 run's all-reduces: the amax grids (and nothing else)
    auto step_bytes = [&](ShardingOptions options) {
      models::Transformer model = models::testing::transformer(mc);
      ShardedModel sharded(model, world(), policy, options);
      sharded.materialize(11);
      world().reset_stats();
      sharded.begin_step(true);
      {
        amp::ComputeScope scope(policy);
        model.loss(x, y).total.backward();
      }
      sharded.finish_backward();
      amax_bytes = world().stats().all_reduce_bytes;
      return world().stats().all_gather_bytes;
    };
    const uint64_t bf16 = step_bytes({});
    const uint64_t fp8 =
        step_bytes({.fp8_all_gather = policy.linear_recipe, .fp8_skip = policy.linear_skip});

    const bool two_casts = !amp::weight_cast_serves_both_products(*policy.linear_recipe);
    models::Transformer desc = models::testing::transformer(mc);
    const ShardLayout layout(desc, W);
    uint64_t want_bf16 = 0, want_fp8 = 0, fp8_elements = 0;
    const auto ring = [&](int64_t bytes) { return static_cast<uint64_t>(bytes * (W - 1) / W); };
    for (std::size_t u = 0; u < layout.units().size(); ++u) {
      const UnitLayout& lay = layout.units()[u];
      const int gathers = u == 0 || u + 1 == layout.units().size() ? 1 : 2;
      int64_t fp8_count = 0;
      for (const ParamSlot& p : lay.params) {
        const models::ParamSpec& spec = desc.parameters().spec(p.name);
        if (!spec.linear_module.empty() && spec.linear_module != "lm_head") fp8_count += p.numel;
      }
      want_bf16 += gathers * ring(2 * lay.padded);
      // The FP8 weights one byte an element, the other parameters two, no padding (the root
      // has no FP8 weight: its one all-gather of the padded unit).
      want_fp8 += gathers * (fp8_count == 0 ? ring(2 * lay.padded)
                                            : ring(fp8_count) + ring(2 * (lay.numel - fp8_count)));
      if (two_casts && fp8_count > 0 && gathers == 1) want_fp8 += ring(fp8_count);
      fp8_elements += gathers * static_cast<uint64_t>(fp8_count);
    }
    EXPECT_EQ(bf16, want_bf16);
    EXPECT_EQ(fp8, want_fp8);
    if (r == 0)
      std::printf(
          "%s: one step's all-gather bytes per rank: bf16 %llu, fp8 %llu (%.3fx); the "
          "fp8 step's all-reduces (amax grids, used flags) %llu\n",
          recipe_name, static_cast<unsigned long long>(bf16), static_cast<unsigned long long>(fp8),
          static_cast<double>(fp8) / static_cast<double>(bf16),
          static_cast<unsigned long long>(amax_bytes));

    // The gathered weights equal quantizing the whole master, on every rank.
    models::Transformer model = models::testing::transformer(mc);
    ShardedModel sharded(model, world(), policy,
                         {.reshard_after_forward = false,
                          .fp8_all_gather = policy.linear_recipe,
                          .fp8_skip = policy.linear_skip});
    sharded.materialize(11);
    sharded.begin_step(false);
    {
      amp::ComputeScope scope(policy);
      model.loss(x, y);
    }
    for (std::size_t u = 1; u < layout.units().size(); ++u) {
      const Tensor full = sharded.gather_unit(sharded.master_shard(u));
      for (const ParamSlot& p : layout.units()[u].params) {
        const std::optional<backend::Quantized> got = amp::filed_fp8_weight(sharded.weight(p.name));
        if (!got) continue;
        const backend::Quantized want = backend::cpu_backend().quantize(
            full.slice(0, p.offset, p.offset + p.numel).view(p.shape),
            policy.linear_recipe->output.b);
        EXPECT_EQ(got->data.contiguous().to_doubles(), want.data.to_doubles()) << p.name;
        EXPECT_EQ(got->scales.to_doubles(), want.scales.to_doubles()) << p.name;
      }
    }
    sharded.end_forward();
  }
}

}  // namespace
}  // namespace mixprec::dist
