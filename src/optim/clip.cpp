#include "mixprec/optim/clip.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fused_update.h"
#include "mixprec/backend/backend.h"
#include "mixprec/core/parallel.h"

namespace mixprec::optim {

using detail::kChunk;

namespace {

// The parameters' gradients, each made contiguous (and stored back so) for an in-place pass.
std::vector<Tensor> contiguous_grads(const ParamList& params) {
  std::vector<Tensor> grads;
  for (const auto& p : params) {
    const Tensor raw = p->grad();
    if (!raw.defined()) continue;
    Tensor g = raw.contiguous();
    if (!g.shares_storage_with(raw)) p->set_grad(g);
    grads.push_back(g);
  }
  return grads;
}

}  // namespace

double grad_norm(const ParamList& params, float inv_scale) {
  std::vector<Tensor> grads;
  std::vector<int64_t> sizes;
  for (const auto& p : params) {
    const Tensor raw = p->grad();
    if (!raw.defined()) continue;
    grads.push_back(detail::checked_grad(*p, raw, "grad_norm"));
    sizes.push_back(grads.back().numel());
  }
  // f64 sums of (g * inv_scale)^2 per kChunk piece of every gradient, added in order.
  const std::vector<double> sums =
      map_pieces<double>(sizes, kChunk, [&](std::size_t i, int64_t begin, int64_t end) {
        return detail::square_sum(grads[i], begin, end, inv_scale);
      });
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
  const std::vector<Tensor> grads = contiguous_grads(params);
  backend::current().unscale_and_check(grads, coef);  // g *= coef, rounded once into g's dtype
  return norm;
}

void clip_grad_value(const ParamList& params, double clip_value) {
  MIXPREC_CHECK(clip_value > 0 && std::isfinite(clip_value), "clip_grad_value",
                "clip_value must be finite and > 0, got " + std::to_string(clip_value));
  const std::vector<Tensor> grads = contiguous_grads(params);
  backend::current().clamp_in_place(grads, -clip_value, clip_value);
}

}  // namespace mixprec::optim
