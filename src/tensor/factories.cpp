// Tensor factories. Values are computed in f64 and rounded once into the target dtype;
// random ones are keyed by (seed, stream, element index), so thread count never matters.
#include <cmath>
#include <cstring>

#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {
namespace {

// Fills t (contiguous, cpu) with value_at(i) for each element i, rounding once into t's dtype.
template <class Fn>
void fill_from_f64(Tensor& t, Fn&& value_at) {
  if (t.is_meta()) return;
  constexpr int64_t kChunk = 4096;
  char* out = static_cast<char*>(t.raw_data());
  const std::size_t esz = t.element_size();
  parallel_for(t.numel(), kChunk, [&](int64_t begin, int64_t end) {
    double tmp[kChunk];
    for (int64_t i = begin; i < end; ++i) tmp[i - begin] = value_at(i);
    convert_buffer(DType::f64, tmp, t.dtype(), out + begin * static_cast<int64_t>(esz),
                   static_cast<std::size_t>(end - begin));
  });
}

void require_floating(DType dtype, const char* where) {
  MIXPREC_CHECK(is_floating(dtype), where,
                std::string("needs a floating dtype, got ") + dtype_name(dtype));
}

}  // namespace

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (!t.is_meta()) std::memset(t.raw_data(), 0, t.nbytes());  // +0 is all-zero bits everywhere
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (t.is_meta() || t.numel() == 0) return t;
  unsigned char bits[8];
  convert_buffer(DType::f64, &value, dtype, bits, 1);
  char* out = static_cast<char*>(t.raw_data());
  const std::size_t esz = t.element_size();
  for (int64_t i = 0; i < t.numel(); ++i)
    std::memcpy(out + i * static_cast<int64_t>(esz), bits, esz);
  return t;
}

Tensor Tensor::from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype,
                            const ConvertOptions& opts) {
  MIXPREC_CHECK(
      shape_numel(shape) == static_cast<int64_t>(values.size()), "Tensor::from_doubles",
      std::to_string(values.size()) + " values do not fill shape " + shape_to_string(shape));
  Tensor t = empty(shape, dtype);
  convert_buffer(DType::f64, values.data(), dtype, t.raw_data(), values.size(), opts);
  return t;
}

Tensor Tensor::arange(double start, double end, double step, DType dtype) {
  MIXPREC_CHECK(step != 0.0 && std::isfinite(step) && std::isfinite(start) && std::isfinite(end),
                "Tensor::arange", "needs finite start/end and a finite non-zero step");
  const double count = std::ceil((end - start) / step);
  MIXPREC_CHECK(std::isfinite(count) && count < 0x1p62, "Tensor::arange",
                "arange(" + std::to_string(start) + ", " + std::to_string(end) + ", " +
                    std::to_string(step) + ") has too many elements");
  auto n = static_cast<int64_t>(count > 0 ? count : 0);
  // ceil() of an inexact quotient can admit `end` itself (arange(1, 1.3, 0.1)): drop it.
  while (n > 0 && (step > 0 ? start + static_cast<double>(n - 1) * step >= end
                            : start + static_cast<double>(n - 1) * step <= end))
    --n;
  Tensor t = empty({n}, dtype);
  fill_from_f64(t, [&](int64_t i) { return start + static_cast<double>(i) * step; });
  return t;
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype) {
  require_floating(dtype, "Tensor::uniform");
  MIXPREC_CHECK(low <= high, "Tensor::uniform",
                "low " + std::to_string(low) + " > high " + std::to_string(high));
  Tensor t = empty(shape, dtype);
  const uint64_t seed = gen.seed(), stream = gen.next_stream();
  fill_from_f64(t, [&](int64_t i) {
    return low + (high - low) * Generator::uniform01(seed, stream, static_cast<uint64_t>(i));
  });
  return t;
}

Tensor Tensor::normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype) {
  require_floating(dtype, "Tensor::normal");
  MIXPREC_CHECK(std >= 0.0, "Tensor::normal", "std must be >= 0, got " + std::to_string(std));
  Tensor t = empty(shape, dtype);
  const uint64_t seed = gen.seed(), stream = gen.next_stream();
  fill_from_f64(t, [&](int64_t i) {
    return mean + std * Generator::standard_normal(seed, stream, static_cast<uint64_t>(i));
  });
  return t;
}

}  // namespace mixprec
