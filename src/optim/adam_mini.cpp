#include "mixprec/optim/adam_mini.h"

#include <algorithm>
#include <cmath>

#include "fused_update.h"
#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/optim/adamw.h"

namespace mixprec::optim {
namespace {

// The blocks a parameter's elements fall in. A shard piece (Parameter::shard_piece) holds
// elements [offset, offset + n) of the whole parameter: its blocks keep the whole tensor's
// boundaries (local element i is in local block (i + shift) / size), and the partial blocks at
// its two ends take the mean over the elements this piece holds.
struct LocalBlocks {
  int64_t count = 0, size = 1, shift = 0, n = 0;
  LocalBlocks(const Parameter& param) {
    const AdamMiniPartition part = adam_mini_partition(param.full_shape(), param.role());
    n = param.master().numel();
    if (part.blocks == 0 || part.block_size == 0 || n == 0) return;
    size = part.block_size;
    shift = param.element_offset() % size;
    count = (shift + n + size - 1) / size;
  }
  int64_t begin(int64_t b) const { return std::max<int64_t>(0, b * size - shift); }
  int64_t end(int64_t b) const { return std::min(n, (b + 1) * size - shift); }
  bool cut(int64_t b) const { return end(b) - begin(b) < size; }
  int64_t first_element(int64_t b, int64_t offset) const { return offset - shift + b * size; }
};

// sum over each block (the part this tensor holds) of (g * inv_scale)^2: f64 partial sums over
// fixed pieces of at most kChunk elements (never crossing a block), added in order.
std::vector<double> block_sum_sq(const Tensor& grad, float inv_scale, const LocalBlocks& blocks) {
  using detail::kChunk;
  const int64_t pieces_per_block = (blocks.size + kChunk - 1) / kChunk;
  const int64_t pieces = blocks.count * pieces_per_block;
  std::vector<double> partial(static_cast<std::size_t>(pieces), 0.0);
  const int64_t grain = std::max<int64_t>(1, kChunk / std::min(blocks.size, kChunk));
  parallel_for(pieces, grain, [&](int64_t first, int64_t last) {
    for (int64_t piece = first; piece < last; ++piece) {
      const int64_t block = piece / pieces_per_block;
      const int64_t begin = blocks.begin(block) + (piece % pieces_per_block) * kChunk;
      const int64_t end = std::min(blocks.end(block), begin + kChunk);
      if (begin < end)
        partial[static_cast<std::size_t>(piece)] = detail::square_sum(grad, begin, end, inv_scale);
    }
  });
  std::vector<double> sums(static_cast<std::size_t>(blocks.count));
  for (int64_t b = 0; b < blocks.count; ++b) {
    double s = 0;
    for (int64_t k = 0; k < pieces_per_block; ++k)
      s += partial[static_cast<std::size_t>(b * pieces_per_block + k)];
    sums[static_cast<std::size_t>(b)] = s;
  }
  return sums;
}

}  // namespace

void AdamMini::before_updates(const ParamList& params, const std::vector<Tensor>& grads,
                              float inv_scale) {
  cut_sums_.clear();
  if (!sum_cut_blocks_) return;
  std::vector<CutBlock> cut;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    const LocalBlocks blocks(p);
    if (blocks.count == 0) continue;
    std::vector<int64_t> ends{0};  // only a piece's first and last blocks can be cut
    if (blocks.count > 1) ends.push_back(blocks.count - 1);
    for (const int64_t b : ends) {
      if (!blocks.cut(b)) continue;
      const double part = detail::square_sum(grads[i], blocks.begin(b), blocks.end(b), inv_scale);
      cut.push_back({&p, blocks.first_element(b, p.element_offset()), part});
    }
  }
  sum_cut_blocks_(cut);
  for (const CutBlock& c : cut) cut_sums_[{c.param, c.first_element}] = c.sum_sq;
}

AdamMiniPartition adam_mini_partition(const Shape& shape, const ParamRole& role) {
  const int64_t numel = shape_numel(shape);
  if (role.heads > 0) {
    MIXPREC_CHECK(
        shape.size() >= 2 && shape[0] % role.heads == 0, "adam_mini_partition",
        std::to_string(role.heads) + " heads do not divide the rows of " + shape_to_string(shape));
    return {role.heads, numel / role.heads};
  }
  // A row: the last dimension's values at one index of the others (a 2-d weight's output
  // rows; a stacked [E, F, d] weight's F rows of each expert, as E separate [F, d] weights).
  if (shape.size() >= 2 && shape.back() > 0) return {numel / shape.back(), shape.back()};
  return {1, numel};
}

AdamMini::AdamMini(std::vector<ParamGroup> groups, AdamMiniOptions options)
    : StatefulOptimizer(std::move(groups), options.seed, "AdamMini"), options_(options) {
  check_adam_options(options.beta1, options.beta2, options.eps, "AdamMini");
}

AdamMini::AdamMini(ParamList params, double lr, double weight_decay, AdamMiniOptions options)
    : AdamMini(std::vector<ParamGroup>{{std::move(params), lr, weight_decay}}, options) {}

std::vector<BufferSpec> AdamMini::buffer_specs(const Parameter& param) const {
  return {{"exp_avg", param.master().shape()}, {"vmean", {LocalBlocks(param).count}, true}};
}

void AdamMini::update(Parameter& param, const ParamGroup& group, ParamState& state,
                      const Tensor& grad, float inv_scale) {
  const LocalBlocks part(param);
  if (part.count == 0) return;  // an empty parameter
  const double wd = weight_decay_of(group, param);
  const auto t = static_cast<double>(state.step);
  const double bias1 = 1 - std::pow(options_.beta1, t), bias2 = 1 - std::pow(options_.beta2, t);
  const float decay = static_cast<float>(1 - group.lr * wd);
  const float lr = static_cast<float>(group.lr);
  const float inv_bias1 = static_cast<float>(1 / bias1);
  const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  const float b1 = static_cast<float>(options_.beta1), b1c = static_cast<float>(1 - options_.beta1);
  const float b2 = static_cast<float>(options_.beta2), b2c = static_cast<float>(1 - options_.beta2);
  const float eps = static_cast<float>(options_.eps);
  const detail::RoundingKeys keys{seed(), fnv1a(param.name()), state.step};

  // The per-block second moment and step size (few values: computed serially).
  // The mean over each whole block: a cut block's sum comes from before_updates when the
  // ranks add their parts, else it is the mean over the part this piece holds.
  std::vector<double> mean_sq = block_sum_sq(grad, inv_scale, part);
  for (int64_t b = 0; b < part.count; ++b) {
    double& m = mean_sq[static_cast<std::size_t>(b)];
    const auto it = part.cut(b)
                        ? cut_sums_.find({&param, part.first_element(b, param.element_offset())})
                        : cut_sums_.end();
    m = it != cut_sums_.end() ? it->second / static_cast<double>(part.size)
                              : m / static_cast<double>(part.end(b) - part.begin(b));
  }
  Tensor& vmean = state.buffers[1];
  std::vector<float> v(static_cast<std::size_t>(part.count));
  widen_to_f32(vmean.dtype(), vmean.raw_data(), v.data(), v.size());
  for (std::size_t b = 0; b < v.size(); ++b)
    v[b] = b2 * v[b] + b2c * static_cast<float>(mean_sq[b]);
  const bool stochastic =
      vmean.dtype() != DType::f32 && param.policy().master_update == amp::MasterUpdate::stochastic;
  ConvertOptions store;
  if (stochastic)
    store = {
        .rounding = Rounding::stochastic,
        .seed = keys.seed,
        .stream = detail::rounding_stream(keys, 1 + detail::kMaxState),
        // block b of a piece is block (offset / size) + b of the whole parameter
        .index_base = static_cast<uint64_t>((param.element_offset() - part.shift) / part.size)};
  convert_from_f32(v.data(), vmean.dtype(), vmean.raw_data(), v.size(), store);
  // The step uses the stored second moment (the same value when it is f32).
  widen_to_f32(vmean.dtype(), vmean.raw_data(), v.data(), v.size());
  std::vector<float> step_size(v.size());
  for (std::size_t b = 0; b < v.size(); ++b)
    step_size[b] = inv_bias1 / (std::sqrt(v[b]) / bias2_sqrt + eps);

  const int64_t bs = part.size, shift = part.shift;
  detail::fused_update(param, grad, inv_scale, std::span<Tensor>(state.buffers.data(), 1),
                       state.kahan, keys, [&](const detail::Tile& tile) {
                         float* const m = tile.s[0];
                         for (int64_t i = 0; i < tile.len;) {
                           const int64_t block = (tile.begin + i + shift) / bs;
                           const int64_t stop =
                               std::min(tile.len, (block + 1) * bs - shift - tile.begin);
                           const float ss = step_size[static_cast<std::size_t>(block)];
                           for (; i < stop; ++i) {
                             const float mi = b1 * m[i] + b1c * (tile.g[i] * tile.inv_scale);
                             m[i] = mi;
                             tile.p_new[i] = tile.p[i] * decay - (mi * ss) * lr;
                           }
                         }
                       });
}

}  // namespace mixprec::optim
