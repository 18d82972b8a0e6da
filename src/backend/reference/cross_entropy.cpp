// Reference cross-entropy from logits: f64 log-sum-exp per row, mean over the kept rows.
#include <cmath>
#include <limits>
#include <string>

#include "reference_kernels.h"

namespace mixprec::backend::reference {
namespace {

// targets as i64; a kept one (not ignore_index) outside [0, V) is an Error naming its row.
std::vector<int64_t> checked_targets(const Tensor& targets, int64_t V, int64_t ignore_index) {
  const std::vector<int64_t> t = indices(targets);
  for (size_t r = 0; r < t.size(); ++r)
    MIXPREC_CHECK(t[r] == ignore_index || (t[r] >= 0 && t[r] < V), "cross_entropy",
                  "target " + std::to_string(t[r]) + " at row " + std::to_string(r) +
                      " is outside [0, " + std::to_string(V) + ") and is not ignore_index " +
                      std::to_string(ignore_index));
  return t;
}

}  // namespace

// loss_n = (max_n - x_n[t_n]) + log(sum(exp(x_n - max_n))) on kept rows; the mean of those.
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                          int64_t ignore_index) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const std::vector<int64_t> t = checked_targets(targets, V, ignore_index);
  const std::vector<double> x = values(logits);
  std::vector<double> mx(static_cast<size_t>(N), 0.0), ls(mx.size(), 0.0);
  double total = 0;
  int64_t n_valid = 0;
  for (int64_t r = 0; r < N; ++r) {
    if (t[static_cast<size_t>(r)] == ignore_index) continue;
    const double* xr = x.data() + r * V;
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t i = 0; i < V; ++i)
      if (xr[i] > m) m = xr[i];  // skips NaN, as the cpu kernel's max does
    for (int64_t i = 0; i < V; ++i) sum += std::exp(xr[i] - m);
    mx[static_cast<size_t>(r)] = m;
    ls[static_cast<size_t>(r)] = std::log(sum);
    total += (m - xr[t[static_cast<size_t>(r)]]) + std::log(sum);
    ++n_valid;
  }
  const DType sd = stats_dtype(logits.dtype());
  const double loss = n_valid == 0 ? std::numeric_limits<double>::quiet_NaN()
                                   : total / static_cast<double>(n_valid);
  return {make({loss}, {}, sd), make(mx, {N}, sd), make(ls, {N}, sd), n_valid};
}

// dlogits = (exp((x - max) - log_sum) - onehot(target))·scale on kept rows (saved statistics),
// zero on ignored rows.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                              const CrossEntropyForward& saved, int64_t ignore_index,
                              double scale) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const std::vector<int64_t> t = checked_targets(targets, V, ignore_index);
  const std::vector<double> x = values(logits), mx = values(saved.row_max),
                            ls = values(saved.log_sum);
  std::vector<double> dx(x.size(), 0.0);
  for (int64_t r = 0; r < N; ++r) {
    const int64_t tr = t[static_cast<size_t>(r)];
    if (tr == ignore_index) continue;
    for (int64_t i = 0; i < V; ++i) {
      const auto e = static_cast<size_t>(r * V + i);
      const double p = std::exp((x[e] - mx[static_cast<size_t>(r)]) - ls[static_cast<size_t>(r)]);
      dx[e] = (p - (i == tr ? 1.0 : 0.0)) * scale;
    }
  }
  return make(dx, logits.shape(), logits.dtype());
}

}  // namespace mixprec::backend::reference
