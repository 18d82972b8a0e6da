#include "mixprec/tensor/shape.h"

#include <limits>

#include "mixprec/core/error.h"

namespace mixprec {

int64_t shape_numel(const Shape& shape) {
  // The product of the non-zero dims must fit too: strides are built from it even when a
  // zero dim makes the tensor empty ([0, 2^32, 2^32] would overflow them).
  int64_t extent = 1;
  bool empty = false;
  for (int64_t d : shape) {
    MIXPREC_CHECK(d >= 0, "shape", "negative dimension in " + shape_to_string(shape));
    if (d == 0) {
      empty = true;
      continue;
    }
    MIXPREC_CHECK(extent <= std::numeric_limits<int64_t>::max() / d, "shape",
                  "element count overflows int64 in " + shape_to_string(shape));
    extent *= d;
  }
  return empty ? 0 : extent;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

bool is_row_major(const Shape& shape, const Shape& strides) {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;  // a size-1 dim's stride never matters
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::string shape_to_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

int normalize_dim(int64_t dim, int ndim, const char* where) {
  const int64_t d = dim < 0 ? dim + ndim : dim;
  MIXPREC_CHECK(
      d >= 0 && d < ndim, where,
      "dim " + std::to_string(dim) + " out of range for a " + std::to_string(ndim) + "-d tensor");
  return static_cast<int>(d);
}

Shape infer_shape(Shape shape, int64_t numel, const char* where) {
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      MIXPREC_CHECK(infer_at < 0, where, "only one dimension may be -1");
      infer_at = static_cast<int>(i);
    } else {
      MIXPREC_CHECK(shape[i] >= 0, where, "invalid dimension in " + shape_to_string(shape));
      known *= shape[i];
    }
  }
  if (infer_at >= 0) {
    MIXPREC_CHECK(known != 0 && numel % known == 0, where,
                  "cannot infer -1 in " + shape_to_string(shape) + " for " + std::to_string(numel) +
                      " elements");
    shape[static_cast<size_t>(infer_at)] = numel / known;
  }
  MIXPREC_CHECK(
      shape_numel(shape) == numel, where,
      "shape " + shape_to_string(shape) + " does not hold " + std::to_string(numel) + " elements");
  return shape;
}

}  // namespace mixprec
