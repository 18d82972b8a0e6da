#include "mixprec/optim/adamw.h"

#include <cmath>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "fused_update.h"

namespace mixprec::optim {

void check_adam_options(double beta1, double beta2, double eps, const char* where) {
  MIXPREC_CHECK(
      beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, where,
      "betas must lie in [0, 1), got " + std::to_string(beta1) + " and " + std::to_string(beta2));
  MIXPREC_CHECK(eps >= 0, where, "eps must be >= 0, got " + std::to_string(eps));
}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : StatefulOptimizer(std::move(groups), options.seed, "AdamW"), options_(options) {
  check_adam_options(options.beta1, options.beta2, options.eps, "AdamW");
}

AdamW::AdamW(ParamList params, double lr, double weight_decay, AdamWOptions options)
    : AdamW(std::vector<ParamGroup>{{std::move(params), lr, weight_decay}}, options) {}

std::vector<BufferSpec> AdamW::buffer_specs(const Parameter& param) const {
  return {{"exp_avg", param.master().shape()}, {"exp_avg_sq", param.master().shape(), true}};
}

void AdamW::update(Parameter& param, const ParamGroup& group, ParamState& state, const Tensor& grad,
                   float inv_scale) {
  const double wd = weight_decay_of(group, param);
  const auto t = static_cast<double>(state.step);
  const double bias1 = 1 - std::pow(options_.beta1, t), bias2 = 1 - std::pow(options_.beta2, t);
  // Scalars as PyTorch forms them: in f64, each rounded once to f32.
  const float decay = static_cast<float>(1 - group.lr * wd);
  const float neg_step = static_cast<float>(-(group.lr / bias1));
  const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  const float b1 = static_cast<float>(options_.beta1), b1c = static_cast<float>(1 - options_.beta1);
  const float b2 = static_cast<float>(options_.beta2), b2c = static_cast<float>(1 - options_.beta2);
  const float eps = static_cast<float>(options_.eps);
  const detail::RoundingKeys keys{seed(), fnv1a(param.name()), state.step};
  detail::fused_update(
      param, grad, inv_scale, state.buffers, state.kahan, keys, [&](const detail::Tile& tile) {
        float* const m = tile.s[0];
        float* const v = tile.s[1];
        const float* const p = tile.p;
        const float* const gr = tile.g;
        int64_t i = 0;
#if defined(__SSE2__)
        // 4 lanes with the scalar loop's operations in its order (no FMA): the same bits.
        // GCC does not vectorise the scalar loop because sqrtf may set errno.
        const __m128 inv = _mm_set1_ps(tile.inv_scale), vb1 = _mm_set1_ps(b1),
                     vb1c = _mm_set1_ps(b1c), vb2 = _mm_set1_ps(b2), vb2c = _mm_set1_ps(b2c),
                     vbias2 = _mm_set1_ps(bias2_sqrt), veps = _mm_set1_ps(eps),
                     vdecay = _mm_set1_ps(decay), vstep = _mm_set1_ps(neg_step);
        for (; i + 4 <= tile.len; i += 4) {
          const __m128 g = _mm_mul_ps(_mm_loadu_ps(gr + i), inv);
          const __m128 mi = _mm_add_ps(_mm_mul_ps(vb1, _mm_loadu_ps(m + i)), _mm_mul_ps(vb1c, g));
          const __m128 vi =
              _mm_add_ps(_mm_mul_ps(vb2, _mm_loadu_ps(v + i)), _mm_mul_ps(_mm_mul_ps(vb2c, g), g));
          _mm_storeu_ps(m + i, mi);
          _mm_storeu_ps(v + i, vi);
          const __m128 denom = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vi), vbias2), veps);
          _mm_storeu_ps(tile.p_new + i, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(p + i), vdecay),
                                                   _mm_div_ps(_mm_mul_ps(vstep, mi), denom)));
        }
#endif
        for (; i < tile.len; ++i) {
          const float g = gr[i] * tile.inv_scale;
          const float mi = b1 * m[i] + b1c * g;
          const float vi = b2 * v[i] + b2c * g * g;
          m[i] = mi;
          v[i] = vi;
          const float denom = std::sqrt(vi) / bias2_sqrt + eps;
          tile.p_new[i] = p[i] * decay + neg_step * mi / denom;
        }
      });
}

}  // namespace mixprec::optim
