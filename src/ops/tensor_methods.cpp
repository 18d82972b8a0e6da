// Tensor's op methods: each forwards to the function of the same name (one definition of
// every op, two spellings).
#include "mixprec/ops.h"

namespace mixprec {

Tensor Tensor::exp() const {
  return mixprec::exp(*this);
}
Tensor Tensor::log() const {
  return mixprec::log(*this);
}
Tensor Tensor::log1p() const {
  return mixprec::log1p(*this);
}
Tensor Tensor::expm1() const {
  return mixprec::expm1(*this);
}
Tensor Tensor::sqrt() const {
  return mixprec::sqrt(*this);
}
Tensor Tensor::rsqrt() const {
  return mixprec::rsqrt(*this);
}
Tensor Tensor::reciprocal() const {
  return mixprec::reciprocal(*this);
}
Tensor Tensor::tanh() const {
  return mixprec::tanh(*this);
}
Tensor Tensor::pow(double exponent) const {
  return mixprec::pow(*this, exponent);
}
Tensor Tensor::pow(const Tensor& exponent) const {
  return mixprec::pow(*this, exponent);
}
Tensor Tensor::sum() const {
  return mixprec::sum(*this);
}
Tensor Tensor::sum(int64_t dim, bool keepdim) const {
  return mixprec::sum(*this, dim, keepdim);
}
Tensor Tensor::mean() const {
  return mixprec::mean(*this);
}
Tensor Tensor::mean(int64_t dim, bool keepdim) const {
  return mixprec::mean(*this, dim, keepdim);
}
Tensor Tensor::prod() const {
  return mixprec::prod(*this);
}
Tensor Tensor::prod(int64_t dim, bool keepdim) const {
  return mixprec::prod(*this, dim, keepdim);
}
Tensor Tensor::cumsum(int64_t dim) const {
  return mixprec::cumsum(*this, dim);
}
Tensor Tensor::logsumexp(int64_t dim, bool keepdim) const {
  return mixprec::logsumexp(*this, dim, keepdim);
}
Tensor Tensor::norm() const {
  return mixprec::norm(*this);
}
Tensor Tensor::matmul(const Tensor& other) const {
  return mixprec::matmul(*this, other);
}
Tensor Tensor::mm(const Tensor& other) const {
  return mixprec::mm(*this, other);
}
Tensor Tensor::bmm(const Tensor& other) const {
  return mixprec::bmm(*this, other);
}
Tensor Tensor::mv(const Tensor& vec) const {
  return mixprec::mv(*this, vec);
}
Tensor Tensor::dot(const Tensor& other) const {
  return mixprec::dot(*this, other);
}
Tensor Tensor::addmm(const Tensor& m1, const Tensor& m2, double beta, double alpha) const {
  return mixprec::addmm(*this, m1, m2, beta, alpha);
}
Tensor Tensor::baddbmm(const Tensor& b1, const Tensor& b2, double beta, double alpha) const {
  return mixprec::baddbmm(*this, b1, b2, beta, alpha);
}
Tensor Tensor::addcmul(const Tensor& t1, const Tensor& t2, double value) const {
  return mixprec::addcmul(*this, t1, t2, value);
}
Tensor Tensor::addcdiv(const Tensor& t1, const Tensor& t2, double value) const {
  return mixprec::addcdiv(*this, t1, t2, value);
}
Tensor Tensor::where(const Tensor& cond, const Tensor& other) const {
  return mixprec::where(cond, *this, other);
}
Tensor Tensor::index_put(const std::vector<Tensor>& indices, const Tensor& values,
                         bool accumulate) const {
  return mixprec::index_put(*this, indices, values, accumulate);
}
Tensor Tensor::eq(const Tensor& other) const {
  return mixprec::eq(*this, other);
}
Tensor Tensor::ne(const Tensor& other) const {
  return mixprec::ne(*this, other);
}
Tensor Tensor::lt(const Tensor& other) const {
  return mixprec::lt(*this, other);
}
Tensor Tensor::le(const Tensor& other) const {
  return mixprec::le(*this, other);
}
Tensor Tensor::gt(const Tensor& other) const {
  return mixprec::gt(*this, other);
}
Tensor Tensor::ge(const Tensor& other) const {
  return mixprec::ge(*this, other);
}
Tensor Tensor::eq(double other) const {
  return mixprec::eq(*this, other);
}
Tensor Tensor::ne(double other) const {
  return mixprec::ne(*this, other);
}
Tensor Tensor::lt(double other) const {
  return mixprec::lt(*this, other);
}
Tensor Tensor::le(double other) const {
  return mixprec::le(*this, other);
}
Tensor Tensor::gt(double other) const {
  return mixprec::gt(*this, other);
}
Tensor Tensor::ge(double other) const {
  return mixprec::ge(*this, other);
}

}  // namespace mixprec
