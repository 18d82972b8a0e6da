// How a model's parameters are sharded (FSDP "flat parameters"): parameters are grouped into
// the units the model declares (models::Model::shard_units; for the transformer one per block,
// "blocks.<l>", plus a "root" unit for the embeddings, final norm and LM head), each parameter
// in the unit its description names (ParamSpec::unit). A unit's parameters are laid end to
// end, in the order the model added them, into one flat buffer of `numel` elements, padded with
// zeros to `padded` (a multiple of the world size), and rank r owns elements [r * shard, (r + 1) *
// shard). Pure arithmetic on the meta description: nothing is allocated, so the memory planner and
// the checkpoint code use the same layout the training run does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/models/model.h"

namespace mixprec::dist {

struct ParamSlot {
  std::string name;
  Shape shape;
  optim::ParamRole role;
  int64_t offset = 0;  // first element in the unit's flat buffer
  int64_t numel = 0;
};

// The part of one parameter a rank owns: param elements [begin, end) (row-major order), at
// shard_offset in the rank's shard of the unit.
struct ShardPiece {
  std::size_t slot = 0;  // index into UnitLayout::params
  int64_t begin = 0, end = 0;
  int64_t shard_offset = 0;
  int64_t numel() const { return end - begin; }
};

struct UnitLayout {
  std::string name;  // "root" or "blocks.<l>"
  std::vector<ParamSlot> params;
  int64_t numel = 0;   // sum of the parameters' sizes
  int64_t padded = 0;  // numel rounded up to a multiple of the world size
  int64_t shard = 0;   // padded / world size: every rank's share
  // The pieces of parameters inside rank's shard, in flat order (padding owns none).
  std::vector<ShardPiece> pieces(int rank) const;
};

class ShardLayout {
 public:
  // Units in the order the model declares them (the order its forward enters them, root
  // first). Error when a parameter names a unit the model does not declare.
  ShardLayout(const models::Model& model, int world_size);

  int world_size() const { return world_size_; }
  const std::vector<UnitLayout>& units() const { return units_; }
  // Index of the unit holding a parameter; Error for an unknown name.
  std::size_t unit_index(std::string_view param_name) const;
  int64_t numel() const;         // all parameters
  int64_t padded_numel() const;  // all units, with padding
  int64_t shard_numel() const;   // one rank's share of every unit
  int64_t max_unit_padded(bool blocks_only) const;

 private:
  int world_size_;
  std::vector<UnitLayout> units_;
  std::map<std::string, std::size_t, std::less<>> unit_of_param_;
};

}  // namespace mixprec::dist
