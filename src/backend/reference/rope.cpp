// Reference rotate-half RoPE: f64 angles, f64 cos/sin, f64 rotation, one rounding.
#include <cmath>

#include "reference_kernels.h"

namespace mixprec::backend::reference {

// Row r of x [..., T, Dh] sits at position offset + r % T; for i < Dh/2 the pair
// (x[i], x[i + Dh/2]) turns by the angle position·theta^(-2i/Dh) (minus it when inverse).
Tensor rope_rotate(const Tensor& x, double theta, int64_t offset, bool inverse, DType out_dtype) {
  const int64_t dh = x.size(-1), t = x.size(-2), half = dh / 2;
  const int64_t rows = dh == 0 ? 0 : x.numel() / dh;
  const std::vector<double> xv = values(x);
  std::vector<double> y(xv.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < half; ++i) {
      // The cpu kernel's angle expression, so the two differ only in rounding cos/sin to f32.
      const double inv_freq =
          1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dh));
      const double angle = static_cast<double>(offset + r % t) * inv_freq;
      const double c = std::cos(angle), s = inverse ? -std::sin(angle) : std::sin(angle);
      const auto a = static_cast<size_t>(r * dh + i), b = a + static_cast<size_t>(half);
      y[a] = xv[a] * c - xv[b] * s;
      y[b] = xv[b] * c + xv[a] * s;
    }
  return make(y, x.shape(), out_dtype);
}

}  // namespace mixprec::backend::reference
