// concat: block copies. Each part contributes one contiguous block per outer index.
#include <algorithm>
#include <cstring>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/indexing.h"

namespace mixprec::cpu {
namespace {

constexpr int64_t kChunkBytes = int64_t{1} << 18;  // bytes per parallel chunk of copying
constexpr int64_t kFewOuter = 16;  // below this many outer rows, split the blocks themselves

}  // namespace

Tensor concat(const std::vector<Tensor>& parts, int dim, const Shape& out_shape) {
  Tensor out = Tensor::empty(out_shape, parts.at(0).dtype());
  const ReduceGeometry g = reduce_geometry(out_shape, dim);
  const auto esz = static_cast<int64_t>(out.element_size());
  const int64_t out_row = g.n * g.inner * esz;                    // bytes of one outer row of out
  std::vector<int64_t> block(parts.size()), start(parts.size());  // bytes per outer row
  int64_t at = 0;
  for (size_t t = 0; t < parts.size(); ++t) {
    block[t] = parts[t].size(dim) * g.inner * esz;
    start[t] = at;
    at += block[t];
  }
  char* dst = static_cast<char*>(out.raw_data());
  if (g.outer >= kFewOuter) {
    parallel_for(g.outer, std::max<int64_t>(1, kChunkBytes / std::max<int64_t>(1, out_row)),
                 [&](int64_t o0, int64_t o1) {
                   for (int64_t o = o0; o < o1; ++o)
                     for (size_t t = 0; t < parts.size(); ++t)
                       if (block[t] > 0)
                         std::memcpy(dst + o * out_row + start[t],
                                     static_cast<const char*>(parts[t].raw_data()) + o * block[t],
                                     static_cast<size_t>(block[t]));
                 });
    return out;
  }
  for (int64_t o = 0; o < g.outer; ++o) {
    for (size_t t = 0; t < parts.size(); ++t) {
      char* d = dst + o * out_row + start[t];
      const char* s = static_cast<const char*>(parts[t].raw_data()) + o * block[t];
      parallel_for(block[t], kChunkBytes, [&](int64_t b0, int64_t b1) {
        std::memcpy(d + b0, s + b0, static_cast<size_t>(b1 - b0));
      });
    }
  }
  return out;
}

}  // namespace mixprec::cpu
