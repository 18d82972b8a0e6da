// The shape and layout helpers of the kernel vocabulary.
#include "mixprec/backend/kernel_types.h"

namespace mixprec::backend {

DType compute_dtype(std::initializer_list<DType> dtypes) {
  for (DType d : dtypes)
    if (d == DType::f64) return DType::f64;
  return DType::f32;
}

void check_floating(const char* op, const Tensor& t, const char* what) {
  MIXPREC_CHECK(t.defined(), op, std::string(what) + " is an undefined tensor");
  MIXPREC_CHECK(is_floating(t.dtype()), op,
                std::string(what) + " must be floating, got " + dtype_name(t.dtype()));
  MIXPREC_CHECK(!t.is_meta(), op, std::string(what) + " is a meta tensor (no data)");
}

void check_compute_dtype(const char* op, DType dtype) {
  MIXPREC_CHECK(is_computable(dtype), op,
                std::string("no arithmetic in ") + dtype_name(dtype) +
                    " (storage only); use f64, f32, bf16 or f16");
}

ReduceGeometry reduce_geometry(const Shape& shape, int dim) {
  ReduceGeometry g;
  if (shape.empty()) return g;
  const auto d = static_cast<size_t>(dim);
  for (size_t i = 0; i < d; ++i) g.outer *= shape[i];
  g.n = shape[d];
  for (size_t i = d + 1; i < shape.size(); ++i) g.inner *= shape[i];
  return g;
}

DType reduce_acc_dtype(DType dtype) {
  return accumulate_dtype(dtype);
}

bool rows_are_dense(const Tensor& t) {
  if (t.ndim() != 4) return false;
  const int64_t t_len = t.size(2), dh = t.size(3);
  // Rows may go straight to a GEMM as a matrix with leading dimension `row`: their Dh
  // elements adjacent, and rows no closer than Dh (not expanded, not overlapping).
  return (dh <= 1 || t.strides()[3] == 1) && (t_len <= 1 || t.strides()[2] >= dh);
}

}  // namespace mixprec::backend
