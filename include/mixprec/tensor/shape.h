// Shapes and strides (in elements), with the checks every view needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mixprec {

using Shape = std::vector<int64_t>;

// Product of the dims; throws on a negative dim or int64 overflow.
int64_t shape_numel(const Shape& shape);
// Row-major strides of a contiguous tensor of this shape.
Shape contiguous_strides(const Shape& shape);
// Whether `strides` lay `shape` out row-major and dense (size-1 dims' strides ignored).
bool is_row_major(const Shape& shape, const Shape& strides);
// "[2, 3, 4]"
std::string shape_to_string(const Shape& shape);
// Maps a possibly negative dim into [0, ndim); throws naming `where` when out of range.
int normalize_dim(int64_t dim, int ndim, const char* where);
// Resolves one -1 entry so the product equals numel; throws when impossible.
Shape infer_shape(Shape shape, int64_t numel, const char* where);

}  // namespace mixprec
