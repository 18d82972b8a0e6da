// Reference rotate-half RoPE: f64 angles, f64 cos/sin, f64 rotation, one rounding.
#include <cmath>
#include <string>

#include "reference_kernels.h"

namespace mixprec::backend::reference {

// Row r of x [..., T, Dh] sits at position offset + r % T; for i < Dh/2 the pair
// (x[i], x[i + Dh/2]) turns by the angle position·inv_freq[i] (minus it when inverse), with
// cos and sin times `factor`.
Tensor rope_rotate(const Tensor& x, std::span<const double> inv_freq, double factor, int64_t offset,
                   bool inverse, DType out_dtype) {
  const int64_t dh = x.size(-1), t = x.size(-2), half = dh / 2;
  const int64_t rows = dh == 0 ? 0 : x.numel() / dh;
  MIXPREC_CHECK(static_cast<int64_t>(inv_freq.size()) == half, "rope",
                "expects Dh/2 = " + std::to_string(half) + " inverse frequencies, got " +
                    std::to_string(inv_freq.size()));
  const std::vector<double> xv = values(x);
  std::vector<double> y(xv.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < half; ++i) {
      // The cpu kernel's angle expression, so the two differ only in rounding cos/sin to f32.
      const double angle = static_cast<double>(offset + r % t) * inv_freq[static_cast<size_t>(i)];
      const double c = std::cos(angle) * factor, s = std::sin(angle) * factor;
      const double sign_s = inverse ? -s : s;
      const auto a = static_cast<size_t>(r * dh + i), b = a + static_cast<size_t>(half);
      y[a] = xv[a] * c - xv[b] * sign_s;
      y[b] = xv[b] * c + xv[a] * sign_s;
    }
  return make(y, x.shape(), out_dtype);
}

}  // namespace mixprec::backend::reference
