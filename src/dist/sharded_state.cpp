// Sharded <-> full training state (see sharded_state.h).
#include "mixprec/dist/sharded_state.h"

#include <algorithm>
#include <set>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/core/error.h"
#include "mixprec/optim/optimizer_table.h"

namespace mixprec::dist {
namespace {

using io::kModelPrefix;
using io::kOptimPrefix;

Tensor scalar_f64(double v) {
  return Tensor::full({}, v, DType::f64);
}

// The blocks of a per-block buffer (optimizer_table.h) over a parameter.
optim::AdamMiniPartition partition_of(const optim::OptimizerKind& owner, const ParamSlot& slot) {
  return owner.blocks(slot.shape, slot.role);
}

// The buffer kinds ("exp_avg", ...) this rank's optimizer state holds, the same on every rank
// once a step was taken (checked: a mismatch would make the collectives below disagree).
std::vector<std::string> buffer_kinds(const optim::StateDict& state, const ShardedModel& model) {
  std::set<std::string> kinds;
  for (const auto& p : model.parameters()) {
    const std::string prefix = p->name() + ".";
    for (auto it = state.lower_bound(prefix); it != state.end() && it->first.starts_with(prefix);
         ++it) {
      const std::string kind = it->first.substr(prefix.size());
      if (kind != "step" && kind.find('.') == std::string::npos) kinds.insert(kind);
    }
  }
  std::string joined;
  for (const std::string& k : kinds) joined += k + ";";
  MIXPREC_CHECK(same_on_every_rank(model.comm(), models::name_stream(joined)),
                "gather_training_state",
                "the ranks hold different optimizer buffers (this rank: " + joined + ")");
  return {kinds.begin(), kinds.end()};
}

}  // namespace

io::TensorMap gather_training_state(const ShardedModel& model, const optim::Optimizer* optimizer,
                                    const amp::GradScaler* scaler) {
  NoGradGuard no_grad;
  const ShardLayout& layout = model.layout();
  const int rank = model.comm().rank();
  io::TensorMap out;
  const optim::StateDict state = optimizer ? optimizer->state_dict() : optim::StateDict{};
  const std::vector<std::string> kinds =
      optimizer ? buffer_kinds(state, model) : std::vector<std::string>{};

  for (std::size_t u = 0; u < layout.units().size(); ++u) {
    const UnitLayout& lay = layout.units()[u];
    const std::vector<ShardPiece> pieces = lay.pieces(rank);
    auto cut = [&](const Tensor& full, const std::string& prefix, const std::string& suffix) {
      for (const ParamSlot& p : lay.params)
        out[prefix + p.name + suffix] =
            full.slice(0, p.offset, p.offset + p.numel).reshape(p.shape).clone();
    };
    cut(model.gather_unit(model.master_shard(u)), kModelPrefix, "");
    if (!optimizer) continue;

    // Per-parameter step counts: -1 where this rank holds no state.
    Tensor steps = Tensor::full({static_cast<int64_t>(lay.params.size())}, -1.0, DType::f64);
    for (const ShardPiece& piece : pieces) {
      const auto it = state.find(lay.params[piece.slot].name + ".step");
      if (it != state.end()) steps.data<double>()[piece.slot] = it->second.item();
    }
    model.comm().all_reduce(steps, ReduceOp::max);
    for (std::size_t i = 0; i < lay.params.size(); ++i)
      if (steps.data<double>()[i] >= 0)
        out[kOptimPrefix + lay.params[i].name + ".step"] = scalar_f64(steps.data<double>()[i]);

    for (const std::string& kind : kinds) {
      // The dtype of this buffer (the master dtype, or f32): from any piece holding it.
      DType dt = DType::f32;
      for (const auto& p : model.parameters())
        if (const auto it = state.find(p->name() + "." + kind); it != state.end()) {
          dt = it->second.dtype();
          break;
        }
      const optim::OptimizerKind* owner = optim::per_block_owner(kind);
      if (!owner) {
        Tensor shard = Tensor::zeros({lay.shard}, dt);
        for (const ShardPiece& piece : pieces) {
          const auto it = state.find(lay.params[piece.slot].name + "." + kind);
          if (it == state.end()) continue;
          shard.slice(0, piece.shard_offset, piece.shard_offset + piece.numel())
              .copy_from(it->second.reshape({-1}));
        }
        const Tensor full = model.gather_unit(shard);
        for (std::size_t i = 0; i < lay.params.size(); ++i)
          if (steps.data<double>()[i] >= 0) {
            const ParamSlot& p = lay.params[i];
            out[kOptimPrefix + p.name + "." + kind] =
                full.slice(0, p.offset, p.offset + p.numel).reshape(p.shape).clone();
          }
        continue;
      }
      // One value per block: blocks of all parameters end to end; a block's value comes from
      // the rank holding its first element (zeros elsewhere, so a sum collects it exactly).
      std::vector<int64_t> block_base(lay.params.size() + 1, 0);
      for (std::size_t i = 0; i < lay.params.size(); ++i)
        block_base[i + 1] = block_base[i] + partition_of(*owner, lay.params[i]).blocks;
      Tensor blocks = Tensor::zeros({block_base.back()}, DType::f32);
      for (const ShardPiece& piece : pieces) {
        const auto it = state.find(lay.params[piece.slot].name + "." + kind);
        if (it == state.end()) continue;
        const int64_t bs = partition_of(*owner, lay.params[piece.slot]).block_size;
        const std::vector<double> local = it->second.to_doubles();
        const int64_t first_block = piece.begin / bs;
        for (int64_t b = first_block; b * bs < piece.end; ++b)
          if (b * bs >= piece.begin)  // this piece holds the block's first element
            blocks.data<float>()[block_base[piece.slot] + b] =
                static_cast<float>(local[static_cast<std::size_t>(b - first_block)]);
      }
      model.comm().all_reduce(blocks, ReduceOp::sum);
      for (std::size_t i = 0; i < lay.params.size(); ++i)
        if (steps.data<double>()[i] >= 0)
          out[kOptimPrefix + lay.params[i].name + "." + kind] =
              blocks.slice(0, block_base[i], block_base[i + 1]).to(dt).clone();
    }
  }
  if (optimizer) out[std::string(kOptimPrefix) + "step"] = state.at("step").clone();
  if (scaler)
    for (const auto& [key, value] : scaler->checkpoint_dict()) out[io::kScalerPrefix + key] = value;
  return out;
}

io::TensorMap shard_training_state(const io::TensorMap& full, const ShardedModel& model) {
  NoGradGuard no_grad;
  const ShardLayout& layout = model.layout();
  io::TensorMap out;
  std::set<std::string> piece_keys;
  for (const UnitLayout& lay : layout.units()) {
    for (const ShardPiece& piece : lay.pieces(model.comm().rank())) {
      const ParamSlot& p = lay.params[piece.slot];
      auto slice_of = [&](const std::string& key) {
        piece_keys.insert(key);
        const auto it = full.find(key);
        if (it == full.end()) return;
        if (it->second.numel() != p.numel) {
          out[key] = it->second;  // mis-shaped: restore names it
          return;
        }
        out[key] = it->second.reshape({-1}).slice(0, piece.begin, piece.end).clone();
      };
      slice_of(kModelPrefix + p.name);
      const std::string optim_prefix = kOptimPrefix + p.name + ".";
      for (auto it = full.lower_bound(optim_prefix);
           it != full.end() && it->first.starts_with(optim_prefix); ++it) {
        const std::string kind = it->first.substr(optim_prefix.size());
        if (kind.find('.') != std::string::npos) continue;  // another parameter's entry
        if (kind == "step") {
          out[it->first] = it->second;
          piece_keys.insert(it->first);
        } else if (const optim::OptimizerKind* owner = optim::per_block_owner(kind)) {
          piece_keys.insert(it->first);
          const int64_t bs = partition_of(*owner, p).block_size;
          const int64_t first = piece.begin / bs, last = (piece.end - 1) / bs + 1;
          out[it->first] = it->second.numel() >= last
                               ? it->second.reshape({-1}).slice(0, first, last).clone()
                               : it->second;
        } else {
          slice_of(it->first);
        }
      }
    }
  }
  // Everything that is not a parameter's (optim.step, scaler.*, train.*) passes through;
  // other ranks' parameters stay out. A model entry that names no parameter passes too: the
  // restore reports it as an unsharded run does.
  std::set<std::string> params;
  for (const UnitLayout& lay : layout.units())
    for (const ParamSlot& p : lay.params) params.insert(kModelPrefix + p.name);
  for (const auto& [key, value] : full) {
    if (piece_keys.contains(key)) continue;
    if (key.starts_with(kModelPrefix) && params.contains(key)) continue;
    if (key.starts_with(kOptimPrefix) && key != std::string(kOptimPrefix) + "step") continue;
    out[key] = value;
  }
  return out;
}

}  // namespace mixprec::dist
