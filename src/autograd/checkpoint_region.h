// The checkpoint whose function runs now on this thread, in its forward or its recompute
// (private to src/autograd: checkpoint.cpp opens regions, saved_ops.cpp reads them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "mixprec/autograd/saved_ops.h"

namespace mixprec::detail {

struct KeptOp {
  std::string op;
  std::vector<Tensor> outputs;
};

struct CheckpointRegion {
  CheckpointRegion(bool recompute_, SavePolicy policy_, std::vector<KeptOp>* kept_)
      : recompute(recompute_), policy(policy_), kept(kept_) {}
  bool recompute = false;
  SavePolicy policy = nullptr;  // null: a full checkpoint, no op output kept
  std::vector<KeptOp>* kept = nullptr;
  std::map<std::string, int64_t, std::less<>> calls;  // per op name, for the policy's nth
  std::size_t next = 0;                               // recompute: the next kept entry to hand back
};

// Null outside every checkpoint's function.
CheckpointRegion* current_region();

// Scoped: `region` is the current one (regions do not nest: a checkpoint inside another's
// function runs as part of it).
class RegionScope {
 public:
  explicit RegionScope(CheckpointRegion& region);
  ~RegionScope();
  RegionScope(const RegionScope&) = delete;
  RegionScope& operator=(const RegionScope&) = delete;

 private:
  CheckpointRegion* outer_;
};

}  // namespace mixprec::detail
