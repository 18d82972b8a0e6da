// Reference LayerNorm / RMSNorm over the last dim: f64 rows, statistics rounded once.
#include <cmath>

#include "reference_kernels.h"

namespace mixprec::backend::reference {
Tensor norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                    bool center, NormStats& stats) {
  const int64_t D = last_dim(x), rows = D == 0 ? 0 : x.numel() / D;
  const std::vector<double> xv = values(x);
  const std::vector<double> w = weight.defined() ? values(weight) : std::vector<double>();
  const std::vector<double> b = bias.defined() ? values(bias) : std::vector<double>();
  std::vector<double> y(xv.size()), mean(static_cast<size_t>(rows)), rstd(mean.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = xv.data() + r * D;
    double mu = 0, var = 0;
    for (int64_t i = 0; center && i < D; ++i) mu += xr[i];
    mu /= static_cast<double>(D);
    for (int64_t i = 0; i < D; ++i) var += (xr[i] - mu) * (xr[i] - mu);
    const double rs = 1.0 / std::sqrt(var / static_cast<double>(D) + eps);
    for (int64_t i = 0; i < D; ++i) {
      double v = (xr[i] - mu) * rs;
      if (!w.empty()) v *= w[static_cast<size_t>(i)];
      if (!b.empty()) v += b[static_cast<size_t>(i)];
      y[static_cast<size_t>(r * D + i)] = v;
    }
    mean[static_cast<size_t>(r)] = mu;
    rstd[static_cast<size_t>(r)] = rs;
  }
  const DType sd = stats_dtype(x.dtype());
  stats.rstd = make(rstd, {rows}, sd);
  stats.mean = center ? make(mean, {rows}, sd) : Tensor();
  return make(y, x.shape(), x.dtype());
}

// g = dy·w, xhat = (x - mean)·rstd with the saved (rounded) statistics:
// dx = rstd·(g - mean(g) - xhat·mean(g·xhat)) (no mean(g) term without centring),
// dweight = sum over rows of dy·xhat, dbias = sum over rows of dy.
NormGrads norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                        const NormStats& stats, bool center, bool need_dx, bool need_dweight,
                        bool need_dbias) {
  const char* where = center ? "layernorm backward" : "rmsnorm backward";
  MIXPREC_CHECK(dy.shape() == x.shape(), where,
                "gradient shape " + shape_to_string(dy.shape()) + " differs from input shape " +
                    shape_to_string(x.shape()));
  NormGrads out;
  need_dweight = need_dweight && weight.defined();
  if (!need_dx && !need_dweight && !need_dbias) return out;
  const int64_t D = last_dim(x), rows = D == 0 ? 0 : x.numel() / D;
  const std::vector<double> xv = values(x), g = values(dy), rstd = values(stats.rstd);
  const std::vector<double> mean = center ? values(stats.mean) : std::vector<double>();
  const std::vector<double> w = weight.defined() ? values(weight) : std::vector<double>();
  std::vector<double> dx(xv.size()), dw(static_cast<size_t>(D)), db(dw.size());
  std::vector<double> xhat(static_cast<size_t>(D)), gw(xhat.size());  // one row each
  for (int64_t r = 0; r < rows; ++r) {
    const double mu = center ? mean[static_cast<size_t>(r)] : 0.0;
    const double rs = rstd[static_cast<size_t>(r)];
    double sum_g = 0, sum_gx = 0;
    for (int64_t i = 0; i < D; ++i) {
      const auto e = static_cast<size_t>(r * D + i), c = static_cast<size_t>(i);
      xhat[c] = (xv[e] - mu) * rs;
      gw[c] = w.empty() ? g[e] : g[e] * w[c];
      dw[c] += g[e] * xhat[c];
      db[c] += g[e];
      sum_g += gw[c];
      sum_gx += gw[c] * xhat[c];
    }
    const double c1 = sum_gx / static_cast<double>(D);
    const double c2 = center ? sum_g / static_cast<double>(D) : 0.0;
    for (int64_t i = 0; i < D; ++i) {
      const auto c = static_cast<size_t>(i);
      dx[static_cast<size_t>(r * D + i)] = rs * (gw[c] - c2 - xhat[c] * c1);
    }
  }
  if (need_dx) out.dx = make(dx, x.shape(), x.dtype());
  if (need_dweight) out.dweight = make(dw, {D}, weight.dtype());
  // The bias is not passed in; by the contract it has x's dtype.
  if (need_dbias) out.dbias = make(db, {D}, x.dtype());
  return out;
}

}  // namespace mixprec::backend::reference
