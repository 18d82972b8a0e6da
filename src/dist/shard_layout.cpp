#include "mixprec/dist/shard_layout.h"

#include <algorithm>
#include <map>

#include "mixprec/core/error.h"

namespace mixprec::dist {

std::vector<ShardPiece> UnitLayout::pieces(int rank) const {
  const int64_t lo = static_cast<int64_t>(rank) * shard, hi = lo + shard;
  std::vector<ShardPiece> out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ParamSlot& p = params[i];
    const int64_t b = std::max(lo, p.offset), e = std::min(hi, p.offset + p.numel);
    if (b < e) out.push_back({i, b - p.offset, e - p.offset, b - lo});
  }
  return out;
}

ShardLayout::ShardLayout(const models::Model& model, int world_size) : world_size_(world_size) {
  MIXPREC_CHECK(world_size >= 1, "ShardLayout",
                "world size must be >= 1, got " + std::to_string(world_size));
  std::map<std::string, std::size_t, std::less<>> unit_of_name;
  for (const std::string& name : model.shard_units()) {
    MIXPREC_CHECK(unit_of_name.emplace(name, units_.size()).second, "ShardLayout",
                  "the model declares unit '" + name + "' twice");
    units_.emplace_back().name = name;
  }
  MIXPREC_CHECK(!units_.empty(), "ShardLayout", "the model declares no shard unit");
  for (const models::ParamSpec& s : model.parameters().specs()) {
    const auto it = unit_of_name.find(s.unit);
    MIXPREC_CHECK(
        it != unit_of_name.end(), "ShardLayout",
        "parameter '" + s.name + "' is in unit '" + s.unit + "', which the model does not declare");
    UnitLayout& u = units_[it->second];
    u.params.push_back({s.name, s.shape, s.role, u.numel, s.numel()});
    u.numel += s.numel();
    unit_of_param_.emplace(s.name, it->second);
  }
  for (UnitLayout& u : units_) {
    u.shard = (u.numel + world_size - 1) / world_size;
    u.padded = u.shard * world_size;
  }
}

std::size_t ShardLayout::unit_index(std::string_view param_name) const {
  const auto it = unit_of_param_.find(param_name);
  MIXPREC_CHECK(it != unit_of_param_.end(), "ShardLayout",
                "no parameter named '" + std::string(param_name) + "'");
  return it->second;
}

int64_t ShardLayout::numel() const {
  int64_t n = 0;
  for (const UnitLayout& u : units_) n += u.numel;
  return n;
}
int64_t ShardLayout::padded_numel() const {
  int64_t n = 0;
  for (const UnitLayout& u : units_) n += u.padded;
  return n;
}
int64_t ShardLayout::shard_numel() const {
  int64_t n = 0;
  for (const UnitLayout& u : units_) n += u.shard;
  return n;
}
int64_t ShardLayout::max_unit_padded(bool blocks_only) const {
  int64_t m = 0;
  for (const UnitLayout& u : units_)
    if (!blocks_only || u.name != "root") m = std::max(m, u.padded);
  return m;
}

}  // namespace mixprec::dist
