// About this many elements per parallel task in the cpu kernels whose tasks are cut by size
// (reductions, indexing, top-k): large enough to amortise a task's start, small enough to
// share out rows of a few thousand.
#pragma once

#include <cstdint>

namespace mixprec::cpu {

inline constexpr int64_t kTaskElems = int64_t{1} << 15;

}  // namespace mixprec::cpu
