#include "fp8_gather.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/dtype.h"
#include "mixprec/numerics/scaled_cast.h"

namespace mixprec::dist::detail {
namespace {

constexpr const char* kFp8Gather = "fp8 all-gather";

// The row segments of a piece of a [rows, cols] weight: elements [begin, end) row-major.
struct Segment {
  int64_t row, col0, col1;  // columns [col0, col1) of row
  int64_t at;               // its first element's index within the piece
};

std::vector<Segment> segments(const ShardPiece& p, int64_t cols) {
  std::vector<Segment> out;
  for (int64_t e = p.begin; e < p.end;) {
    const int64_t row = e / cols, col0 = e % cols;
    const int64_t col1 = std::min(cols, col0 + (p.end - e));
    out.push_back({row, col0, col1, e - p.begin});
    e += col1 - col0;
  }
  return out;
}

// A segment's values widened to f32 into buf.
void widen(const Tensor& master_shard, const ShardPiece& p, const Segment& s, float* buf) {
  const std::size_t size = dtype_size(master_shard.dtype());
  const auto* src = static_cast<const char*>(master_shard.raw_data()) +
                    static_cast<std::size_t>(p.shard_offset + s.at) * size;
  widen_row_f32(master_shard.dtype(), src, buf, static_cast<std::size_t>(s.col1 - s.col0));
}

int64_t bits_of(float amax) {
  return static_cast<int64_t>(std::bit_cast<uint32_t>(amax));
}

}  // namespace

namespace {

// A cast of weight [rows, cols] by spec for `cast`'s product, its grid on W from `grid_offset`.
Fp8Weight weight_cast(std::size_t slot, int64_t rows, int64_t cols, WeightCast cast,
                      const backend::QuantSpec& spec, int64_t grid_offset, int64_t offset) {
  Fp8Weight w;
  w.slot = slot;
  w.rows = rows;
  w.cols = cols;
  w.cast = cast;
  w.spec = spec;
  if (cast == WeightCast::output) {
    w.block = backend::resolved_block(spec, rows, cols);
  } else {  // spec's blocks lie on Wᵀ [cols, rows]
    const backend::BlockShape t = backend::resolved_block(spec, cols, rows);
    w.block = {t.cols, t.rows};
  }
  w.grid_rows = (rows + w.block.rows - 1) / w.block.rows;
  w.grid_cols = (cols + w.block.cols - 1) / w.block.cols;
  w.grid_offset = grid_offset;
  w.offset = offset;
  return w;
}

}  // namespace

Fp8GatherPlan plan_fp8_gather(const ShardLayout& layout, const models::Model& model,
                              const amp::LinearRecipe& recipe, std::span<const std::string> skip) {
  MIXPREC_CHECK(amp::gathers_weight_in_fp8(recipe), kFp8Gather,
                std::string("recipe ") + recipe.name + " " + amp::fp8_gather_refusal(recipe));
  const bool two_casts = !amp::weight_cast_serves_both_products(recipe);
  const int W = layout.world_size();
  Fp8GatherPlan plan;
  for (const UnitLayout& lay : layout.units()) {
    Fp8UnitPlan u;
    u.weight_of_slot.assign(lay.params.size(), -1);
    u.rest_offset.assign(lay.params.size(), -1);
    int64_t fp8_at = 0, rest_at = 0;
    for (std::size_t i = 0; i < lay.params.size(); ++i) {
      const ParamSlot& slot = lay.params[i];
      const models::ParamSpec& spec = model.parameters().spec(slot.name);
      const bool fp8 =
          !spec.linear_module.empty() && spec.shape.size() == 2 &&
          amp::recipe_converts(recipe, skip, spec.linear_module, spec.shape[0], spec.shape[1]);
      if (!fp8) {
        u.rest_offset[i] = rest_at;
        rest_at += slot.numel;
        continue;
      }
      u.weight_of_slot[i] = static_cast<int>(u.weights.size());
      u.weights.push_back(weight_cast(i, spec.shape[0], spec.shape[1], WeightCast::output,
                                      recipe.output.b, plan.grid_size, fp8_at));
      plan.grid_size += u.weights.back().grid_rows * u.weights.back().grid_cols;
      if (two_casts) {
        u.weights_t.push_back(weight_cast(i, spec.shape[0], spec.shape[1], WeightCast::grad_input,
                                          recipe.grad_input.b, plan.grid_size, fp8_at));
        plan.grid_size += u.weights_t.back().grid_rows * u.weights_t.back().grid_cols;
      }
      fp8_at += slot.numel;
    }
    u.fp8_count.assign(W, 0);
    u.rest_count.assign(W, 0);
    for (int r = 0; r < W; ++r)
      for (const ShardPiece& p : lay.pieces(r))
        (u.weight_of_slot[p.slot] >= 0 ? u.fp8_count : u.rest_count)[r] += p.numel();
    u.fp8_total = fp8_at;
    u.rest_total = rest_at;
    plan.units.push_back(std::move(u));
  }
  return plan;
}

namespace {

// partial_amaxes for one cast of the weight piece p holds.
void piece_amaxes(const ShardPiece& p, const Fp8Weight& w, const Tensor& master_shard,
                  std::span<int64_t> amax_bits, int64_t grid_base) {
  const std::vector<Segment> segs = segments(p, w.cols);
  // Each segment's amax per column block, then folded into the grid in order (blocks span
  // rows: the threads must not write one entry together).
  const int64_t bc = w.block.cols;
  std::vector<float> seg_amax(segs.size() * static_cast<std::size_t>(w.grid_cols), 0.0f);
  parallel_for(static_cast<int64_t>(segs.size()), 4, [&](int64_t s0, int64_t s1) {
    std::vector<float> buf(static_cast<std::size_t>(w.cols));
    for (int64_t si = s0; si < s1; ++si) {
      const Segment& s = segs[static_cast<std::size_t>(si)];
      widen(master_shard, p, s, buf.data());
      for (int64_t b = s.col0 / bc; b * bc < s.col1; ++b) {
        const int64_t c0 = std::max(s.col0, b * bc), c1 = std::min(s.col1, (b + 1) * bc);
        seg_amax[static_cast<std::size_t>(si * w.grid_cols + b)] =
            block_amax(buf.data() + (c0 - s.col0), c1 - c0);
      }
    }
  });
  for (std::size_t si = 0; si < segs.size(); ++si) {
    const int64_t grid_row = segs[si].row / w.block.rows;
    for (int64_t b = 0; b < w.grid_cols; ++b) {
      int64_t& entry = amax_bits[static_cast<std::size_t>(w.grid_offset - grid_base +
                                                          grid_row * w.grid_cols + b)];
      entry = std::max(
          entry,
          bits_of(
              seg_amax[si * static_cast<std::size_t>(w.grid_cols) + static_cast<std::size_t>(b)]));
    }
  }
}

}  // namespace

void partial_amaxes(const UnitLayout& unit, const Fp8UnitPlan& plan, int rank,
                    const Tensor& master_shard, std::span<int64_t> amax_bits, int64_t grid_base) {
  for (const ShardPiece& p : unit.pieces(rank)) {
    const int wi = plan.weight_of_slot[p.slot];
    if (wi < 0) continue;
    const auto i = static_cast<std::size_t>(wi);
    piece_amaxes(p, plan.weights[i], master_shard, amax_bits, grid_base);
    if (plan.two_casts()) piece_amaxes(p, plan.weights_t[i], master_shard, amax_bits, grid_base);
  }
}

std::vector<Tensor> fp8_scales(std::span<const Fp8Weight> casts, std::span<const int64_t> amax_bits,
                               int64_t grid_base) {
  std::vector<Tensor> out;
  for (const Fp8Weight& w : casts) {
    Tensor s = Tensor::empty({w.grid_rows, w.grid_cols}, DType::f32);
    float* v = s.data<float>();
    const FloatFormat& f = *info(w.spec.element).format;
    for (int64_t i = 0; i < w.grid_rows * w.grid_cols; ++i) {
      const auto bits =
          static_cast<uint32_t>(amax_bits[static_cast<std::size_t>(w.grid_offset - grid_base + i)]);
      v[i] = scale_from_amax(w.spec.rule, std::bit_cast<float>(bits), f, w.spec.pow2);
    }
    out.push_back(std::move(s));
  }
  return out;
}

void pack_rest_sends(const UnitLayout& unit, const Fp8UnitPlan& plan, int rank,
                     const Tensor& master_shard, Tensor& send_rest) {
  MIXPREC_CHECK(send_rest.numel() == plan.rest_count[static_cast<std::size_t>(rank)], kFp8Gather,
                "send buffer of the wrong size");
  int64_t rest_at = 0;
  for (const ShardPiece& p : unit.pieces(rank)) {
    if (plan.weight_of_slot[p.slot] >= 0) continue;
    send_rest.slice(0, rest_at, rest_at + p.numel())
        .copy_from(master_shard.slice(0, p.shard_offset, p.shard_offset + p.numel()));
    rest_at += p.numel();
  }
}

void pack_fp8_sends(const UnitLayout& unit, const Fp8UnitPlan& plan, WeightCast cast, int rank,
                    const Tensor& master_shard, const std::vector<Tensor>& scales,
                    Tensor& send_fp8) {
  MIXPREC_CHECK(send_fp8.numel() == plan.fp8_count[static_cast<std::size_t>(rank)], kFp8Gather,
                "send buffer of the wrong size");
  const std::vector<Fp8Weight>& casts = plan.casts(cast);
  int64_t fp8_at = 0;
  auto* q = static_cast<uint8_t*>(send_fp8.raw_data());
  for (const ShardPiece& p : unit.pieces(rank)) {
    const int wi = plan.weight_of_slot[p.slot];
    if (wi < 0) continue;
    const Fp8Weight& w = casts[static_cast<std::size_t>(wi)];
    const float* v = scales[static_cast<std::size_t>(wi)].data<float>();
    const ScaleForm form = scale_rule_info(w.spec.rule).form;
    const std::vector<Segment> segs = segments(p, w.cols);
    uint8_t* dst = q + fp8_at;
    parallel_for(static_cast<int64_t>(segs.size()), 4, [&](int64_t s0, int64_t s1) {
      std::vector<float> buf(static_cast<std::size_t>(w.cols));
      for (int64_t si = s0; si < s1; ++si) {
        const Segment& s = segs[static_cast<std::size_t>(si)];
        widen(master_shard, p, s, buf.data());
        // The quantize kernel's own step (scaled_cast.h): the same bytes as casting it whole.
        scale_and_cast_row(buf.data(), s.col0, s.col1 - s.col0, w.block.cols,
                           v + (s.row / w.block.rows) * w.grid_cols, form, w.spec.element,
                           dst + s.at);
      }
    });
    fp8_at += p.numel();
  }
}

backend::Quantized gathered_weight(const Fp8Weight& w, const Tensor& gathered_fp8,
                                   const Tensor& scales) {
  if (w.cast == WeightCast::output)
    return {gathered_fp8.as_strided({w.rows, w.cols}, {w.cols, 1}, w.offset), scales, w.spec};
  return {gathered_fp8.as_strided({w.cols, w.rows}, {1, w.cols}, w.offset),
          scales.transpose(0, 1).contiguous(), w.spec};
}

}  // namespace mixprec::dist::detail
