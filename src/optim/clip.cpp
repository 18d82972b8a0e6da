#include "mixprec/optim/clip.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fused_update.h"
#include "mixprec/cpu/grad_scan.h"
#include "mixprec/parallel.h"

namespace mixprec::optim {
namespace {

using detail::kChunk;

// f64 sums of (g * inv_scale)^2 over each kChunk piece of g, appended in order.
void append_square_sums(const Tensor& g, float inv_scale, std::vector<double>& out) {
  const int64_t n = g.numel(), pieces = (n + kChunk - 1) / kChunk;
  const std::size_t first = out.size();
  out.resize(first + static_cast<std::size_t>(pieces), 0.0);
  parallel_for(n, kChunk, [&](int64_t begin, int64_t end) {
    const double sum = detail::square_sum(g, begin, end, inv_scale);
    out[first + static_cast<std::size_t>(begin / kChunk)] = sum;
  });
}

}  // namespace

double grad_norm(const ParamList& params, float inv_scale) {
  std::vector<double> sums;
  for (const auto& p : params) {
    const Tensor g = p->grad();
    if (g.defined()) append_square_sums(detail::checked_grad(*p, g, "grad_norm"), inv_scale, sums);
  }
  double total = 0;
  for (double s : sums) total += s;
  return std::sqrt(total);
}

float clip_coefficient(double total_norm, double max_norm) {
  const double coef = max_norm / (total_norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

double clip_grad_norm(const ParamList& params, double max_norm) {
  MIXPREC_CHECK(max_norm > 0, "clip_grad_norm",
                "max_norm must be > 0, got " + std::to_string(max_norm));
  return clip_grads_to_norm(params, grad_norm(params), max_norm);
}

double clip_grads_to_norm(const ParamList& params, double norm, double max_norm) {
  MIXPREC_CHECK(max_norm > 0, "clip_grads_to_norm",
                "max_norm must be > 0, got " + std::to_string(max_norm));
  if (!std::isfinite(norm)) return norm;
  const float coef = clip_coefficient(norm, max_norm);
  if (coef == 1.0f) return norm;
  for (const auto& p : params) {
    const Tensor raw = p->grad();
    if (!raw.defined()) continue;
    Tensor g = raw.contiguous();
    cpu::unscale_and_check(g, coef);  // g *= coef, rounded once into g's dtype
    if (!g.shares_storage_with(raw)) p->set_grad(g);
  }
  return norm;
}

}  // namespace mixprec::optim
