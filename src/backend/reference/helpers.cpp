// The reference kernels' shared helpers: f64 reads and writes of tensors, index reads and checks.
#include <string>

#include "reference_kernels.h"

namespace mixprec::backend::reference {

std::vector<double> values(const Tensor& t) {
  return t.detach().to_doubles();  // detached: reading a strided input records no history
}

Tensor make(const std::vector<double>& v, const Shape& shape, DType dtype) {
  return Tensor::from_doubles(v, shape, dtype);
}

DType stats_dtype(DType t) {
  return t == DType::f64 ? DType::f64 : DType::f32;
}

// Read as integers, not through f64, so every i64 value is exact.
std::vector<int64_t> indices(const Tensor& t) {
  const Tensor c = t.detach().contiguous();
  if (c.dtype() == DType::i64) {
    const int64_t* p = c.data<int64_t>();
    return std::vector<int64_t>(p, p + c.numel());
  }
  MIXPREC_CHECK(c.dtype() == DType::i32, "index",
                std::string("index must be i32 or i64, got ") + dtype_name(c.dtype()));
  const int32_t* p = c.data<int32_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

std::vector<int64_t> broadcast_sources(const Shape& from, const Shape& to, const char* where) {
  bool ok = from.size() <= to.size();
  const size_t lead = ok ? to.size() - from.size() : 0;
  for (size_t d = 0; ok && d < from.size(); ++d) ok = from[d] == to[lead + d] || from[d] == 1;
  MIXPREC_CHECK(ok, where, shape_to_string(from) + " does not broadcast to " + shape_to_string(to));
  std::vector<int64_t> src(static_cast<size_t>(shape_numel(to)));
  for (size_t i = 0; i < src.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i), at = 0, stride = 1;
    for (size_t d = to.size(); d-- > lead;) {
      const int64_t c = rest % to[d], size = from[d - lead];
      rest /= to[d];
      if (size != 1) at += c * stride;
      stride *= size;
    }
    src[i] = at;
  }
  return src;
}

void check_range(const std::vector<int64_t>& ix, int64_t bound, const char* op) {
  for (size_t i = 0; i < ix.size(); ++i)
    MIXPREC_CHECK(ix[i] >= 0 && ix[i] < bound, op,
                  "index value " + std::to_string(ix[i]) + " (at flat position " +
                      std::to_string(i) + ") is out of range [0, " + std::to_string(bound) + ")");
}

}  // namespace mixprec::backend::reference
