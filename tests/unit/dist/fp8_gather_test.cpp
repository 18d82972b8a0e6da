// FSDP's FP8 all-gather (src/dist/fp8_gather.h) with the ranks simulated in one process: at
// world sizes whose shard boundaries cut rows and 128x128 blocks, every rank's partial amaxes,
// their MAX, each rank's packed chunk and the compacted gather must give the bytes and scales
// of quantizing each whole master weight at once (the backend's quantize, cpu and reference),
// and the other parameters their param-dtype values.
#include "dist/fp8_gather.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "mixprec/amp/compute_scope.h"
#include "mixprec/amp/fp8_weights.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/backend/backend.h"
#include "mixprec/dist/sharded_model.h"
#include "mixprec/models/transformer/transformer.h"
#include "unit/models/models_testing.h"

namespace mixprec::dist {
namespace {

// Every unit's master values, flat and padded (element e of unit u: a spread of magnitudes
// over twelve binades, some past E4M3's range after scaling by a small block's scale, and one
// all-zero 128x128 block).
std::vector<Tensor> full_masters(const ShardLayout& layout) {
  std::vector<Tensor> out;
  for (const UnitLayout& lay : layout.units()) {
    std::vector<float> v(static_cast<std::size_t>(lay.padded), 0.0f);
    for (int64_t e = 0; e < lay.numel; ++e)
      v[static_cast<std::size_t>(e)] =
          std::ldexp(static_cast<float>((e * 2654435761u) % 1000) / 1000.0f - 0.5f,
                     static_cast<int>((e * 7) % 12) - 6);
    for (const ParamSlot& p : lay.params)  // w_gate [192, 64]: its second row block is zero
      if (p.name.ends_with("w_gate")) std::fill_n(v.begin() + p.offset + 128 * 64, 64 * 64, 0.0f);
    out.push_back(Tensor::from_vector(v));
  }
  return out;
}

void expect_same_bytes(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  EXPECT_EQ(0, std::memcmp(ac.raw_data(), bc.raw_data(),
                           static_cast<std::size_t>(ac.numel()) * ac.element_size()))
      << what;
}

TEST(Fp8Gather, EveryWorldSizeGathersTheBytesOfQuantizingEachWholeMaster) {
  const models::Transformer model =
      models::testing::transformer(models::testing::fp8_tiny_config());
  const std::vector<std::string> skip = {"lm_head"};
  for (const char* name :
       {"tensorwise", "te_current", "te_blockwise", "deepseek_v3", "deepseek_v3_ue8m0", "rowwise",
        "rowwise_with_gw_hp", "mxfp8_cublas", "mxfp8_cublas_rceil"}) {
    const amp::LinearRecipe& recipe = *amp::find_any_linear_recipe(name);
    for (const int W : {1, 2, 3, 5}) {
      SCOPED_TRACE(std::string(name) + " at world size " + std::to_string(W));
      const ShardLayout layout(model, W);
      const detail::Fp8GatherPlan plan = detail::plan_fp8_gather(layout, model, recipe, skip);
      const std::vector<Tensor> masters = full_masters(layout);
      int64_t fp8_weights = 0;
      for (std::size_t u = 0; u < layout.units().size(); ++u) {
        const UnitLayout& lay = layout.units()[u];
        const detail::Fp8UnitPlan& up = plan.units[u];
        fp8_weights += static_cast<int64_t>(up.weights.size());
        if (!up.any()) continue;
        // Two casts exactly where one does not serve both products.
        EXPECT_EQ(up.two_casts(), !amp::weight_cast_serves_both_products(recipe));
        std::vector<int64_t> amax(static_cast<std::size_t>(plan.grid_size), 0);
        auto shard_of = [&](int r) {
          return masters[u].slice(0, r * lay.shard, (r + 1) * lay.shard);
        };
        for (int r = 0; r < W; ++r) {  // each rank's partials, then the MAX all-reduce
          std::vector<int64_t> mine(amax.size(), 0);
          detail::partial_amaxes(lay, up, r, shard_of(r), mine);
          for (std::size_t i = 0; i < amax.size(); ++i) amax[i] = std::max(amax[i], mine[i]);
        }
        Tensor gathered_rest = Tensor::empty({up.rest_total}, DType::bf16);
        int64_t rest_at = 0;
        for (int r = 0; r < W; ++r) {
          const int64_t nr = up.rest_count[static_cast<std::size_t>(r)];
          Tensor send_rest = gathered_rest.slice(0, rest_at, rest_at + nr);
          detail::pack_rest_sends(lay, up, r, shard_of(r), send_rest);
          rest_at += nr;
        }
        EXPECT_EQ(rest_at, up.rest_total);
        for (const amp::WeightCast cast : {amp::WeightCast::output, amp::WeightCast::grad_input}) {
          if (cast == amp::WeightCast::grad_input && !up.two_casts()) continue;
          const std::vector<detail::Fp8Weight>& casts = up.casts(cast);
          const std::vector<Tensor> scales = detail::fp8_scales(casts, amax);
          const backend::QuantSpec& spec =
              cast == amp::WeightCast::output ? recipe.output.b : recipe.grad_input.b;
          Tensor gathered_fp8 = Tensor::empty({up.fp8_total}, spec.element);
          int64_t fp8_at = 0;
          for (int r = 0; r < W; ++r) {  // the all-gather: rank r's part after rank r-1's
            const int64_t nf = up.fp8_count[static_cast<std::size_t>(r)];
            Tensor send_fp8 = gathered_fp8.slice(0, fp8_at, fp8_at + nf);
            detail::pack_fp8_sends(lay, up, cast, r, shard_of(r), scales, send_fp8);
            fp8_at += nf;
          }
          EXPECT_EQ(fp8_at, up.fp8_total);
          for (std::size_t i = 0; i < casts.size(); ++i) {
            const detail::Fp8Weight& w = casts[i];
            const ParamSlot& slot = lay.params[w.slot];
            Tensor whole =
                masters[u].slice(0, slot.offset, slot.offset + slot.numel).view({w.rows, w.cols});
            // grad_input's operand is Wᵀ, quantized whole by its own spec.
            if (cast == amp::WeightCast::grad_input) whole = whole.transpose(0, 1).contiguous();
            const backend::Quantized got = detail::gathered_weight(w, gathered_fp8, scales[i]);
            const std::string what =
                slot.name + (cast == amp::WeightCast::output ? " (output)" : " (grad_input)");
            for (const backend::Backend* be :
                 {&backend::cpu_backend(), &backend::reference_backend()}) {
              const backend::Quantized want = be->quantize(whole, spec);
              expect_same_bytes(got.data, want.data, what + " data by " + std::string(be->name));
              expect_same_bytes(got.scales, want.scales,
                                what + " scales by " + std::string(be->name));
            }
          }
        }
        for (std::size_t i = 0; i < lay.params.size(); ++i) {
          if (up.weight_of_slot[i] >= 0) continue;
          const ParamSlot& p = lay.params[i];
          expect_same_bytes(gathered_rest.slice(0, up.rest_offset[i], up.rest_offset[i] + p.numel),
                            masters[u].slice(0, p.offset, p.offset + p.numel).to(DType::bf16),
                            p.name);
        }
      }
      // Every block's attention and MLP projections (lm_head filtered; router: none here).
      EXPECT_EQ(fp8_weights, 2 * 7);
    }
  }
}

TEST(Fp8Gather, DelayedScalingIsRefused) {
  // Its scales come from amax histories, not the master's current amax.
  const models::Transformer model =
      models::testing::transformer(models::testing::fp8_tiny_config());
  const ShardLayout layout(model, 2);
  EXPECT_THROW(
      detail::plan_fp8_gather(layout, model, *amp::find_any_linear_recipe("te_delayed"), {}),
      Error);
}

// bf16-mixed with the linear recipe `name` on every linear but lm_head.
amp::MixedPrecisionPolicy recipe_policy(const char* name) {
  amp::MixedPrecisionPolicy policy = amp::preset("bf16-mixed");
  policy.linear_recipe = amp::find_any_linear_recipe(name);
  policy.linear_skip = {"lm_head"};
  return policy;
}

// One training forward of the sharded model on a fixed batch (the caller runs backward and
// finish_backward).
Tensor forward_loss(models::Transformer& model, ShardedModel& sharded,
                    const amp::MixedPrecisionPolicy& policy, const config::ModelConfig& mc) {
  sharded.begin_step(true);
  amp::ComputeScope scope(policy);
  return model
      .loss(models::testing::token_grid(2, 8, mc.vocab_size),
            models::testing::token_grid(2, 8, mc.vocab_size, 1))
      .total;
}

// World size 1 through ShardedModel: the weights the model reads are placeholders whose FP8
// form is filed, equal to quantizing the master; the step trains; a read of a placeholder's
// values is an Error; nothing stays filed after the step.
TEST(Fp8Gather, ShardedModelFilesTheGatheredWeightsForTheLinears) {
  const config::ModelConfig mc = models::testing::fp8_tiny_config();
  const amp::MixedPrecisionPolicy policy = recipe_policy("tensorwise");
  models::Transformer model = models::testing::transformer(mc);
  const auto comm = make_single_process_communicator();
  ShardedModel sharded(model, *comm, policy,
                       {.reshard_after_forward = false,  // blocks.0 stays gathered to look at
                        .fp8_all_gather = policy.linear_recipe,
                        .fp8_skip = policy.linear_skip});
  sharded.materialize(3);
  EXPECT_NE(sharded.describe().find("FP8 all-gather of 14 linear weights"), std::string::npos)
      << sharded.describe();

  const Tensor loss = forward_loss(model, sharded, policy, mc);
  const Tensor wq = sharded.weight("blocks.0.attn.wq");
  const std::optional<backend::Quantized> filed = amp::filed_fp8_weight(wq);
  ASSERT_TRUE(filed.has_value());
  const ParamSlot& slot = sharded.layout().units()[1].params[1];
  ASSERT_EQ(slot.name, "blocks.0.attn.wq");
  const Tensor master =
      sharded.master_shard(1).slice(0, slot.offset, slot.offset + slot.numel).view({64, 64});
  const backend::Quantized want =
      backend::cpu_backend().quantize(master, policy.linear_recipe->output.b);
  expect_same_bytes(filed->data, want.data, "wq data");
  expect_same_bytes(filed->scales, want.scales, "wq scale");
  EXPECT_THROW(wq.to_doubles(), Error);  // no bf16 copy exists
  EXPECT_NO_THROW(sharded.weight("blocks.0.attn_norm.weight").to_doubles());
  EXPECT_TRUE(std::isfinite(loss.item()));
  loss.backward();
  sharded.finish_backward();
  EXPECT_FALSE(amp::filed_fp8_weight(wq).has_value());
  for (const auto& piece : sharded.parameters()) {
    ASSERT_TRUE(piece->grad().defined()) << piece->name();
    for (const double g : piece->grad().to_doubles())
      ASSERT_TRUE(std::isfinite(g)) << piece->name();
  }
}

// A recipe with two weight casts (rowwise, MX): the forward reads output's, the backward
// grad_input's, gathered again after resharding, with output's too when the backward recomputes
// the forward (activation checkpoints). Every way of running the step gives the same gradients,
// bit for bit, and the backward's product reads grad_input's own cast (the linear refuses to
// run grad_input from a transposed output cast it cannot serve).
TEST(Fp8Gather, TwoCastRecipesGatherGradInputsCastForTheBackward) {
  const config::ModelConfig mc = models::testing::fp8_tiny_config();
  for (const char* name : {"rowwise", "rowwise_with_gw_hp", "mxfp8_cublas"}) {
    SCOPED_TRACE(name);
    const amp::MixedPrecisionPolicy policy = recipe_policy(name);
    std::vector<std::vector<double>> runs;
    for (const bool reshard : {true, false})
      for (const char* ac : {"none", "full", "selective 2"}) {
        SCOPED_TRACE(std::string(reshard ? "reshard" : "keep") + ", activation checkpoint " + ac);
        models::Transformer model = models::testing::transformer(mc);
        config::ActivationCheckpointConfig acc;
        acc.mode = std::string(ac).substr(0, std::string(ac).find(' '));
        model.set_activation_checkpoint(models::ActivationCheckpoint::from_config(acc));
        const auto comm = make_single_process_communicator();
        ShardedModel sharded(model, *comm, policy,
                             {.reshard_after_forward = reshard,
                              .fp8_all_gather = policy.linear_recipe,
                              .fp8_skip = policy.linear_skip});
        sharded.materialize(3);
        const Tensor loss = forward_loss(model, sharded, policy, mc);
        loss.backward();
        sharded.finish_backward();
        std::vector<double> grads = {loss.item()};
        for (const auto& piece : sharded.parameters())
          for (const double g : piece->grad().to_doubles()) {
            ASSERT_TRUE(std::isfinite(g)) << piece->name();
            grads.push_back(g);
          }
        runs.push_back(std::move(grads));
      }
    for (std::size_t i = 1; i < runs.size(); ++i) EXPECT_EQ(runs[i], runs[0]) << "run " << i;
  }
}

// Per-expert linears (idle_experts = "skip": 2-d weights that run in the grouped GEMM by the
// linear recipe) gather in FP8 as well, and a step through them trains.
TEST(Fp8Gather, PerExpertLinearsOfTheGroupedGemmReadTheirGatheredWeights) {
  config::ModelConfig mc = models::testing::fp8_tiny_config();
  mc.kind = "moe";
  mc.moe.idle_experts = "skip";
  mc.d_ff = 32;
  const amp::MixedPrecisionPolicy policy = recipe_policy("deepseek_v3");
  models::Transformer model = models::testing::transformer(mc);
  const auto comm = make_single_process_communicator();
  ShardedModel sharded(model, *comm, policy,
                       {.fp8_all_gather = policy.linear_recipe, .fp8_skip = policy.linear_skip});
  sharded.materialize(5);
  // 2 blocks x (4 attention projections + 4 experts x 3 SwiGLU projections).
  EXPECT_NE(sharded.describe().find("FP8 all-gather of 32 linear weights"), std::string::npos)
      << sharded.describe();
  const Tensor loss = forward_loss(model, sharded, policy, mc);
  loss.backward();
  sharded.finish_backward();
  EXPECT_TRUE(std::isfinite(loss.item()));
  int64_t expert_pieces = 0;
  for (const auto& piece : sharded.parameters())
    if (piece->name().find("experts.") != std::string::npos) {
      ++expert_pieces;
      for (const double g : piece->grad().to_doubles()) ASSERT_TRUE(std::isfinite(g));
    }
  EXPECT_GT(expert_pieces, 0);
}

}  // namespace
}  // namespace mixprec::dist
