// FSDP's FP8 all-gather (private to src/dist; sharded_model.h runs it). torchao's
// enable_fsdp_float8_all_gather casts each rank's f32 master shard of a converted linear weight
// with the scale of the weight's global amax (one all-reduce) and all-gathers the FP8 bytes
// instead of bf16. Here the scale is any recipe's block grid (tensorwise, 128x128: the weight
// casts that serve both products, amp::weight_cast_serves_both_products), as Transformer
// Engine's cast_master_weights_to_fp8 does it for flat shards whose boundaries cut blocks:
// every rank holds the amax grid of every FP8 weight of the unit, fills the blocks its pieces
// touch, one MAX all-reduce completes them, and each rank casts its elements with their
// block's scale. The gathered bytes then equal quantizing the whole master weight at once,
// whatever the world size.
//
// Wire: one variable-count all-gather (MPI_Iallgatherv) of every rank's FP8 elements (the
// converted weights' parts of its shard, in flat order) and one of its other elements in the
// param dtype. Every rank's FP8 parts in rank order are the FP8 weights end to end, so each
// gathered weight is contiguous; the same holds for the others. No padding travels: the FP8
// weights move one byte per element whatever the ranks' shares of them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mixprec/amp/linear_recipe.h"
#include "mixprec/backend/quantized.h"
#include "mixprec/dist/shard_layout.h"

namespace mixprec::dist::detail {

struct Fp8Weight {
  std::size_t slot = 0;        // in UnitLayout::params
  int64_t rows = 0, cols = 0;  // [out, in]
  backend::QuantSpec spec;     // the output product's weight spec
  backend::BlockShape block;   // resolved on [rows, cols]
  int64_t grid_rows = 0, grid_cols = 0;
  int64_t grid_offset = 0;  // first entry of its amax grid in the plan's amax vector
  int64_t offset = 0;       // where it starts among the unit's gathered FP8 elements
};

struct Fp8UnitPlan {
  std::vector<Fp8Weight> weights;
  std::vector<int> weight_of_slot;   // index into weights, -1: gathered in the param dtype
  std::vector<int64_t> rest_offset;  // per slot: where it starts among the other elements
  std::vector<int64_t> fp8_count, rest_count;  // elements each rank sends, per rank
  int64_t fp8_total = 0, rest_total = 0;
  bool any() const { return !weights.empty(); }
};

struct Fp8GatherPlan {
  std::vector<Fp8UnitPlan> units;
  int64_t grid_size = 0;  // amax entries of every FP8 weight of every unit
};

// Which weights are gathered in FP8: the linear weights (ParamSpec::linear_module) the recipe
// converts with skip list `skip`. Error naming `where` unless one cast serves both products.
Fp8GatherPlan plan_fp8_gather(const ShardLayout& layout, const models::Model& model,
                              const amp::LinearRecipe& recipe, std::span<const std::string> skip);

// amax[grid_offset ...] = the max |x| of rank's elements in each block of unit u's FP8 weights
// (0 for blocks it does not touch), as the bits of a non-negative f32: integer MAX over the
// ranks is then the float max with NaN winning (its bits lie above inf's).
void partial_amaxes(const UnitLayout& unit, const Fp8UnitPlan& plan, int rank,
                    const Tensor& master_shard, std::span<int64_t> amax_bits);
// Each FP8 weight's scales [grid_rows, grid_cols] f32 from the global amaxes, by its rule.
std::vector<Tensor> fp8_scales(const Fp8UnitPlan& plan, std::span<const int64_t> amax_bits);

// What this rank sends: its FP8 elements cast with their blocks' scales (the quantize kernel's
// arithmetic: scaled in f32, saturating, nearest even) into send_fp8 [fp8_count[rank]], the
// others rounded into send_rest [rest_count[rank]] (the param dtype).
void pack_fp8_sends(const UnitLayout& unit, const Fp8UnitPlan& plan, int rank,
                    const Tensor& master_shard, const std::vector<Tensor>& scales, Tensor& send_fp8,
                    Tensor& send_rest);

// The gathered weight as the scaled GEMM reads it: [rows, cols] of gathered_fp8 and its scales.
backend::Quantized gathered_weight(const Fp8Weight& w, const Tensor& gathered_fp8,
                                   const Tensor& scales);

}  // namespace mixprec::dist::detail
