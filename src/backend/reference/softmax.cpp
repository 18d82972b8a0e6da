// Reference softmax / log-softmax over the last dim and their backward, in f64.
#include <cmath>
#include <limits>

#include "reference_kernels.h"

namespace mixprec::backend::reference {
Tensor softmax(const Tensor& x, bool log, SoftmaxStats* stats) {
  const int64_t D = last_dim(x), rows = D == 0 ? 0 : x.numel() / D;
  const std::vector<double> xv = values(x);
  std::vector<double> y(xv.size()), mx(static_cast<size_t>(rows)), ls(mx.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = xv.data() + r * D;
    // The max skips NaN (as the cpu kernel's does); a NaN still makes the row's sum NaN.
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t i = 0; i < D; ++i)
      if (xr[i] > m) m = xr[i];
    for (int64_t i = 0; i < D; ++i) sum += std::exp(xr[i] - m);
    const double l = std::log(sum);
    for (int64_t i = 0; i < D; ++i)
      y[static_cast<size_t>(r * D + i)] = log ? (xr[i] - m) - l : std::exp(xr[i] - m) / sum;
    mx[static_cast<size_t>(r)] = m;
    ls[static_cast<size_t>(r)] = l;
  }
  if (stats) {
    const DType sd = stats_dtype(x.dtype());
    *stats = {make(mx, {rows}, sd), make(ls, {rows}, sd)};
  }
  return make(y, x.shape(), x.dtype());
}

// p = exp((x - max) - log_sum) from the saved statistics; softmax: dx = p·(dy - <dy, p>),
// log-softmax: dx = dy - p·sum(dy).
Tensor softmax_backward(const Tensor& x, const SoftmaxStats& stats, const Tensor& dy, bool log) {
  MIXPREC_CHECK(dy.shape() == x.shape(), log ? "log_softmax backward" : "softmax backward",
                "gradient shape " + shape_to_string(dy.shape()) + " differs from input shape " +
                    shape_to_string(x.shape()));
  const int64_t D = last_dim(x), rows = D == 0 ? 0 : x.numel() / D;
  const std::vector<double> xv = values(x), g = values(dy);
  const std::vector<double> mx = values(stats.max), ls = values(stats.log_sum);
  std::vector<double> dx(xv.size()), p(static_cast<size_t>(D));
  for (int64_t r = 0; r < rows; ++r) {
    const auto o = static_cast<size_t>(r * D);
    double dot = 0, sum = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] = std::exp((xv[o + i] - mx[static_cast<size_t>(r)]) - ls[static_cast<size_t>(r)]);
      dot += g[o + i] * p[i];
      sum += g[o + i];
    }
    for (size_t i = 0; i < p.size(); ++i)
      dx[o + i] = log ? g[o + i] - p[i] * sum : p[i] * (g[o + i] - dot);
  }
  return make(dx, x.shape(), x.dtype());
}

}  // namespace mixprec::backend::reference
