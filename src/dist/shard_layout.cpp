#include "mixprec/dist/shard_layout.h"

#include <algorithm>
#include <map>

#include "mixprec/core/error.h"

namespace mixprec::dist {

std::string unit_name_of(std::string_view param_name) {
  constexpr std::string_view prefix = "blocks.";
  if (!param_name.starts_with(prefix)) return "root";
  const std::size_t dot = param_name.find('.', prefix.size());
  const std::string_view layer = param_name.substr(prefix.size(), dot - prefix.size());
  const bool numeric = !layer.empty() && std::all_of(layer.begin(), layer.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
  if (dot == std::string_view::npos || !numeric) return "root";
  return std::string(param_name.substr(0, dot));
}

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

ShardLayout::ShardLayout(const models::ParameterSet& params, int world_size)
    : world_size_(world_size) {
  MIXPREC_CHECK(world_size >= 1, "ShardLayout",
                "world size must be >= 1, got " + std::to_string(world_size));
  // Blocks sort by layer number (not text: "blocks.10" after "blocks.9"), root first.
  std::map<int64_t, UnitLayout> by_order;
  for (const models::ParamSpec& s : params.specs()) {
    const std::string unit = unit_name_of(s.name);
    const int64_t order = unit == "root" ? -1 : std::stoll(unit.substr(7));
    UnitLayout& u = by_order[order];
    u.name = unit;
    u.params.push_back({s.name, s.shape, s.role, u.numel, s.numel()});
    u.numel += s.numel();
  }
  for (auto& [order, u] : by_order) {
    u.shard = (u.numel + world_size - 1) / world_size;
    u.padded = u.shard * world_size;
    units_.push_back(std::move(u));
  }
}

std::size_t ShardLayout::unit_index(std::string_view param_name) const {
  const std::string unit = unit_name_of(param_name);
  for (std::size_t i = 0; i < units_.size(); ++i)
    if (units_[i].name == unit)
      for (const ParamSlot& p : units_[i].params)
        if (p.name == param_name) return i;
  throw Error("ShardLayout", "no parameter named '" + std::string(param_name) + "'");
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
