// FSDP's FP8 all-gather (private to src/dist; sharded_model.h runs it). torchao's
// enable_fsdp_float8_all_gather casts each rank's f32 master shard of a converted linear weight
// with the scale of the weight's global amax (one all-reduce) and all-gathers the FP8 bytes
// instead of bf16. Here the scale is any recipe's block grid, as Transformer
// Engine's cast_master_weights_to_fp8 does it for flat shards whose boundaries cut blocks:
// every rank holds the amax grid of every FP8 weight of the unit, fills the blocks its pieces
// touch, one MAX all-reduce completes them, and each rank casts its elements with their
// block's scale. The gathered bytes then equal quantizing the whole master weight at once,
// whatever the world size.
//
// Where one cast serves both products that read the weight (tensorwise, 128x128 blocks:
// amp::weight_cast_serves_both_products) it is gathered once. Where grad_input reads the weight
// with other blocks (rowwise and MX scale W along `in` for output, Wᵀ along `out` for
// grad_input), each weight has two casts from the master, one per product, gathered apart: the
// output product's for the forward, grad_input's for the backward (both there when the
// backward recomputes the forward), so a pass moves one byte per element (two in a
// recomputing block's backward).
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

#include "mixprec/amp/fp8_weights.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/backend/quantized.h"
#include "mixprec/dist/shard_layout.h"

namespace mixprec::dist::detail {

using amp::WeightCast;

struct Fp8Weight {
  std::size_t slot = 0;        // in UnitLayout::params
  int64_t rows = 0, cols = 0;  // W [out, in]
  WeightCast cast = WeightCast::output;
  backend::QuantSpec spec;    // the product's weight spec (for grad_input: on Wᵀ)
  backend::BlockShape block;  // on W [rows, cols] (for grad_input: Wᵀ's resolved block swapped)
  int64_t grid_rows = 0, grid_cols = 0;  // the block grid on W
  int64_t grid_offset = 0;               // first entry of its amax grid in the plan's amax vector
  int64_t offset = 0;                    // where it starts among the unit's gathered FP8 elements
};

struct Fp8UnitPlan {
  std::vector<Fp8Weight> weights;  // the output product's casts
  // grad_input's own casts, weight for weight (empty when output's serve both products).
  std::vector<Fp8Weight> weights_t;
  std::vector<int> weight_of_slot;   // index into weights, -1: gathered in the param dtype
  std::vector<int64_t> rest_offset;  // per slot: where it starts among the other elements
  std::vector<int64_t> fp8_count, rest_count;  // elements each rank sends, per rank
  int64_t fp8_total = 0, rest_total = 0;
  bool any() const { return !weights.empty(); }
  bool two_casts() const { return !weights_t.empty(); }
  const std::vector<Fp8Weight>& casts(WeightCast c) const {
    return c == WeightCast::grad_input && two_casts() ? weights_t : weights;
  }
};

struct Fp8GatherPlan {
  std::vector<Fp8UnitPlan> units;
  int64_t grid_size = 0;  // amax entries of every FP8 weight of every unit
};

// Which weights are gathered in FP8: the linear weights (ParamSpec::linear_module) the recipe
// converts with skip list `skip`. Error unless the recipe gathers in FP8
// (amp::gathers_weight_in_fp8).
Fp8GatherPlan plan_fp8_gather(const ShardLayout& layout, const models::Model& model,
                              const amp::LinearRecipe& recipe, std::span<const std::string> skip);

// amax[grid_offset - grid_base ...] = the max |x| of rank's elements in each block of every
// cast of unit u's FP8 weights (0 for blocks it does not touch), as the bits of a non-negative
// f32: integer MAX over the ranks is then the float max with NaN winning (its bits lie above
// inf's). amax_bits holds the plan's entries from grid_base on (a range of units' grids).
void partial_amaxes(const UnitLayout& unit, const Fp8UnitPlan& plan, int rank,
                    const Tensor& master_shard, std::span<int64_t> amax_bits,
                    int64_t grid_base = 0);
// Each cast's scales [grid_rows, grid_cols] (on W) f32 from the global amaxes, by its rule.
std::vector<Tensor> fp8_scales(std::span<const Fp8Weight> casts, std::span<const int64_t> amax_bits,
                               int64_t grid_base = 0);

// What this rank sends for one cast: its FP8 elements cast with their blocks' scales (the
// quantize kernel's arithmetic: scaled in f32, saturating, nearest even) into send_fp8
// [fp8_count[rank]], in W's element order whatever the cast.
void pack_fp8_sends(const UnitLayout& unit, const Fp8UnitPlan& plan, WeightCast cast, int rank,
                    const Tensor& master_shard, const std::vector<Tensor>& scales,
                    Tensor& send_fp8);
// The others, rounded into send_rest [rest_count[rank]] (its dtype: the param dtype).
void pack_rest_sends(const UnitLayout& unit, const Fp8UnitPlan& plan, int rank,
                     const Tensor& master_shard, Tensor& send_rest);

// The gathered weight as its product's scaled GEMM reads it: for output W [rows, cols] of
// gathered_fp8 with its scales; for grad_input Wᵀ (a transposed view of the same bytes, to be
// made contiguous where it is read) with the scales on Wᵀ's grid.
backend::Quantized gathered_weight(const Fp8Weight& w, const Tensor& gathered_fp8,
                                   const Tensor& scales);

}  // namespace mixprec::dist::detail
