// The blocking shared by the sum (reduction.cpp) and max (reduction_max.cpp) reductions. A
// sum's order follows it (chunks along a row, row blocks down a column), so it is one table.
#pragma once

#include <cstdint>

namespace mixprec::cpu::reduction_blocking {

inline constexpr int64_t kChunk = 8192;  // elements per partial along a row
inline constexpr int64_t kBlock = 512;   // elements widened at a time (L1-sized)
inline constexpr int64_t kRows = 64;     // rows per partial down a column
inline constexpr int64_t kCols = 512;    // columns per task down a column

}  // namespace mixprec::cpu::reduction_blocking
