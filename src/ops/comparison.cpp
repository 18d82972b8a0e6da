// eq / ne / lt / le / gt / ge: elementwise tests on values read in the promoted dtype.
#include "mixprec/ops/comparison.h"

#include <string>
#include <vector>

#include "mixprec/ops/elementwise.h"

namespace mixprec {
namespace {

enum class Cmp { eq, ne, lt, le, gt, ge };

bool test(Cmp c, double a, double b) {
  switch (c) {
    case Cmp::eq:
      return a == b;
    case Cmp::ne:
      return a != b;
    case Cmp::lt:
      return a < b;
    case Cmp::le:
      return a <= b;
    case Cmp::gt:
      return a > b;
    case Cmp::ge:
      return a >= b;
  }
  return false;
}

void check(const char* op, const Tensor& t) {
  MIXPREC_CHECK(t.defined(), op, "undefined input");
  MIXPREC_CHECK(!t.is_meta(), op, "meta tensors have no data");
}

// Both read as f64 after rounding into the dtype they compare in (exact for every dtype but
// i64 beyond 2^53).
Tensor compare(const char* op, Cmp c, const Tensor& a, const Tensor& b) {
  check(op, a);
  check(op, b);
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  const DType common = promote(a.dtype(), b.dtype());
  const std::vector<double> av = broadcast_to(a.detach().to(common), shape).to_doubles();
  const std::vector<double> bv = broadcast_to(b.detach().to(common), shape).to_doubles();
  std::vector<double> out(av.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = test(c, av[i], bv[i]) ? 1.0 : 0.0;
  return Tensor::from_doubles(out, shape, DType::boolean);
}

// A number is rounded to a floating tensor's dtype first; beside an integer tensor it is
// compared as it is.
Tensor compare(const char* op, Cmp c, const Tensor& a, double b) {
  check(op, a);
  const double bv = is_floating(a.dtype()) ? Tensor::full({}, b, a.dtype()).item() : b;
  const std::vector<double> av = a.detach().to_doubles();
  std::vector<double> out(av.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = test(c, av[i], bv) ? 1.0 : 0.0;
  return Tensor::from_doubles(out, a.shape(), DType::boolean);
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) {
  return compare("eq", Cmp::eq, a, b);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare("ne", Cmp::ne, a, b);
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare("lt", Cmp::lt, a, b);
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare("le", Cmp::le, a, b);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare("gt", Cmp::gt, a, b);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare("ge", Cmp::ge, a, b);
}
Tensor eq(const Tensor& a, double b) {
  return compare("eq", Cmp::eq, a, b);
}
Tensor ne(const Tensor& a, double b) {
  return compare("ne", Cmp::ne, a, b);
}
Tensor lt(const Tensor& a, double b) {
  return compare("lt", Cmp::lt, a, b);
}
Tensor le(const Tensor& a, double b) {
  return compare("le", Cmp::le, a, b);
}
Tensor gt(const Tensor& a, double b) {
  return compare("gt", Cmp::gt, a, b);
}
Tensor ge(const Tensor& a, double b) {
  return compare("ge", Cmp::ge, a, b);
}

}  // namespace mixprec
